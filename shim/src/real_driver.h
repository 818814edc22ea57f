// The real driver: dlopen("libcuda.so.1") (or CHAMELEON_REAL_LIBCUDA) and the entry points the
// shim forwards to or calls itself. Filled once during initialisation, read-only afterwards, so
// any thread may read it without synchronisation once Runtime::state says ready.
#pragma once

#include <cuda.h>

#include "symbols.h"

namespace chameleon::shim {

/// Driver functions the shim calls for its own purposes (never exported by us).
struct DriverAux {
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*device_get_pci_bus_id)(char*, int, CUdevice) = nullptr;
  CUresult (*device_can_access_peer)(int*, CUdevice, CUdevice) = nullptr;
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*func_get_name)(const char**, CUfunction) = nullptr;
  CUresult (*kernel_get_name)(const char**, CUkernel) = nullptr;
  CUresult (*func_get_param_info)(CUfunction, size_t, size_t*, size_t*) = nullptr;
  CUresult (*kernel_get_param_info)(CUkernel, size_t, size_t*, size_t*) = nullptr;
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned int) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
};

struct RealDriver {
  void* handle = nullptr;
  void* fns[kSymbolCount] = {};  ///< real entry point per exported symbol (null if absent)
  DriverAux aux;
};

/// Opens `path` and resolves everything. False (and a logged reason) when the library cannot be
/// opened; the wrappers then answer CUDA_ERROR_NOT_INITIALIZED... exactly as a missing driver.
bool LoadRealDriver(const char* path, RealDriver* out);

/// The real dlsym of the C library (dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), then
/// "GLIBC_2.2.5"). Never our hook. Thread-safe; resolved on first use.
using DlsymFn = void* (*)(void*, const char*);
DlsymFn RealDlsym();

}  // namespace chameleon::shim
