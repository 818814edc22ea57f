// The two lookup paths a program can take to the driver besides direct linking: dlsym (hooked
// here; the real one comes from dlvsym) and cuGetProcAddress (both ABIs).
#include <dlfcn.h>

#include <cstring>

#include "wrapper_util.h"

using namespace chameleon::shim;

namespace {

// initial-exec: no __tls_get_addr (which may allocate, and allocators may call dlsym).
__attribute__((tls_model("initial-exec"))) thread_local int t_dlsym_depth = 0;

/// The wrapper to hand out for a pointer the real cuGetProcAddress returned.
void* Substitute(const Runtime& rt, const char* symbol, void* real_fn, int version,
                 cuuint64_t flags) {
  if (real_fn == nullptr || symbol == nullptr) return real_fn;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const int pick = SelectVersion(symbol, version, per_thread);
  // 1. The driver returned exactly the entry our table picks (the usual case).
  if (pick >= 0 && rt.driver.fns[pick] == real_fn)
    return WrapperAddress(static_cast<SymbolId>(pick));
  // 2. The driver returned another exported entry we wrap: trust its choice of ABI and flavour.
  for (std::uint32_t i = 0; i < kSymbolCount; ++i) {
    if (rt.driver.fns[i] == real_fn && std::strcmp(kSymbols[i].base, symbol) == 0) {
      return WrapperAddress(static_cast<SymbolId>(i));
    }
  }
  // 3. Another exported entry we do not wrap (a newer ABI than our table knows): untouched.
  Dl_info info{};
  if (dladdr(real_fn, &info) != 0 && info.dli_sname != nullptr && info.dli_saddr == real_fn) {
    return real_fn;
  }
  // 4. An internal address: our table decides, if we have that ABI; else pass through untouched.
  if (pick >= 0 && rt.driver.fns[pick] != nullptr)
    return WrapperAddress(static_cast<SymbolId>(pick));
  return real_fn;
}

using GetProcV2Fn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult*);
using GetProcLegacyFn = CUresult (*)(const char*, void**, int, cuuint64_t);

}  // namespace

extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  const DlsymFn real = RealDlsym();
  if (real == nullptr) return nullptr;
  // Anything that is not a driver name, and any lookup made while we are already inside this
  // hook (a library constructor run by our own dlopen, cuDNN looking itself up), goes straight to
  // the C library as a tail call, so RTLD_NEXT still resolves relative to the real caller.
  // dlfcn.h declares `name` nonnull, but programs do pass null: launder it before testing.
  const char* n = name;
  __asm__("" : "+r"(n));
  if (n == nullptr || n[0] != 'c' || n[1] != 'u' || t_dlsym_depth > 0) {
    return real(handle, name);
  }
  ++t_dlsym_depth;
  void* found = real(handle, name);
  if (found != nullptr) {
    const int id = FindSymbol(name);
    if (id >= 0) found = WrapperAddress(static_cast<SymbolId>(id));
  }
  --t_dlsym_depth;
  return found;
}

CHAMELEON_WRAPPER(cuGetProcAddress_v2, (const char* symbol, void** pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult* status)) {
  Runtime& rt = Enter(kSym_cuGetProcAddress_v2);
  CHAMELEON_REAL(rt, cuGetProcAddress_v2, GetProcV2Fn);
  const CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn != nullptr && g_mode.load(std::memory_order_relaxed) != 0) {
    *pfn = Substitute(rt, symbol, *pfn, version, flags);
  }
  return r;
}

CHAMELEON_WRAPPER(cuGetProcAddress,
                  (const char* symbol, void** pfn, int version, cuuint64_t flags)) {
  Runtime& rt = Enter(kSym_cuGetProcAddress);
  CUresult r = CUDA_ERROR_NOT_INITIALIZED;
  if (auto legacy = Real<GetProcLegacyFn>(rt, kSym_cuGetProcAddress)) {
    r = legacy(symbol, pfn, version, flags);
  } else if (auto v2 = Real<GetProcV2Fn>(rt, kSym_cuGetProcAddress_v2)) {
    CUdriverProcAddressQueryResult status{};
    r = v2(symbol, pfn, version, flags, &status);
  } else {
    return r;
  }
  if (r == CUDA_SUCCESS && pfn != nullptr) *pfn = Substitute(rt, symbol, *pfn, version, flags);
  return r;
}
