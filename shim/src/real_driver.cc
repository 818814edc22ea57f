#include "real_driver.h"

#include <dlfcn.h>

#include <atomic>

#include "log.h"

namespace chameleon::shim {

DlsymFn RealDlsym() {
  static std::atomic<DlsymFn> cached{nullptr};
  DlsymFn fn = cached.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  // dlvsym is not hooked, so resolving dlsym through it cannot recurse into our dlsym.
  void* sym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (sym == nullptr) sym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  fn = reinterpret_cast<DlsymFn>(sym);
  cached.store(fn, std::memory_order_release);
  return fn;
}

namespace {

template <typename Fn>
void Resolve(DlsymFn lookup, void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(lookup(handle, name));
}

void ResolveAux(DlsymFn lookup, void* h, DriverAux* aux) {
  Resolve(lookup, h, "cuInit", &aux->init);
  Resolve(lookup, h, "cuDeviceGetCount", &aux->device_get_count);
  Resolve(lookup, h, "cuDeviceGet", &aux->device_get);
  Resolve(lookup, h, "cuDeviceTotalMem_v2", &aux->device_total_mem);
  Resolve(lookup, h, "cuDeviceGetAttribute", &aux->device_get_attribute);
  Resolve(lookup, h, "cuDeviceGetPCIBusId", &aux->device_get_pci_bus_id);
  Resolve(lookup, h, "cuDeviceCanAccessPeer", &aux->device_can_access_peer);
  Resolve(lookup, h, "cuCtxGetDevice", &aux->ctx_get_device);
  Resolve(lookup, h, "cuFuncGetName", &aux->func_get_name);
  Resolve(lookup, h, "cuKernelGetName", &aux->kernel_get_name);
  Resolve(lookup, h, "cuFuncGetParamInfo", &aux->func_get_param_info);
  Resolve(lookup, h, "cuKernelGetParamInfo", &aux->kernel_get_param_info);
  Resolve(lookup, h, "cuStreamIsCapturing", &aux->stream_is_capturing);
  Resolve(lookup, h, "cuEventCreate", &aux->event_create);
  Resolve(lookup, h, "cuEventRecord", &aux->event_record);
  Resolve(lookup, h, "cuEventQuery", &aux->event_query);
  Resolve(lookup, h, "cuEventSynchronize", &aux->event_synchronize);
  Resolve(lookup, h, "cuEventElapsedTime_v2", &aux->event_elapsed_time);
  if (aux->event_elapsed_time == nullptr) {
    Resolve(lookup, h, "cuEventElapsedTime", &aux->event_elapsed_time);
  }
}

}  // namespace

bool LoadRealDriver(const char* path, RealDriver* out) {
  DlsymFn lookup = RealDlsym();
  if (lookup == nullptr) {
    Log(LogLevel::kError, "cannot find the C library's dlsym; passing through nothing");
    return false;
  }
  // RTLD_NOLOAD first: if the program already loaded a libcuda, use that very copy.
  void* handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    Log(LogLevel::kError, "cannot open the real driver '%s': %s", path, why ? why : "?");
    return false;
  }
  out->handle = handle;
  for (std::uint32_t i = 0; i < kSymbolCount; ++i) {
    out->fns[i] = lookup(handle, kSymbols[i].name);
    // A symbol that resolves to ourselves means `path` is not a driver (e.g. the shim itself).
    if (out->fns[i] == WrapperAddress(static_cast<SymbolId>(i))) out->fns[i] = nullptr;
  }
  ResolveAux(lookup, handle, &out->aux);
  return true;
}

}  // namespace chameleon::shim
