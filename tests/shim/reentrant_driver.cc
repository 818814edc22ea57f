// A "driver" for the dlsym re-entrancy test: it links the real (simulated) libcuda.so.1, so the
// shim resolves every entry point through it, and its constructor looks up and calls a tracked
// entry point while the shim is still initialising (the shim dlopens this library from inside
// its first call). The shim must answer with an error, not deadlock or crash.
#include <cuda.h>
#include <dlfcn.h>

extern "C" {
__attribute__((visibility("default"))) int chameleon_test_reentrant_rc = -1;
}

__attribute__((constructor)) static void ReenterTheShim() {
  auto fn =
      reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  CUdeviceptr p = 0;
  chameleon_test_reentrant_rc = fn != nullptr ? static_cast<int>(fn(&p, 16)) : -2;
}
