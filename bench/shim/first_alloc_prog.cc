// first_alloc_prog: times a process's first device allocation, the call at which the shim
// decides its executor and (with a daemon) makes its first, synchronous connection attempt.
// Prints the call's wall time in nanoseconds; exit 0 when it succeeded. Spawned 64 at a time by
// first_alloc_bench.
#include <cuda.h>

#include <chrono>
#include <cstdio>

int main() {
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS) {
    std::fprintf(stderr, "first_alloc_prog: no device\n");
    return 2;
  }
  CUdeviceptr ptr = 0;
  const auto start = std::chrono::steady_clock::now();
  const CUresult r = cuMemAlloc(&ptr, 1u << 20);
  const auto end = std::chrono::steady_clock::now();
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "first_alloc_prog: cuMemAlloc failed (%d)\n", static_cast<int>(r));
    return 1;
  }
  std::printf("%lld\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()));
  cuMemFree(ptr);
  return 0;
}
