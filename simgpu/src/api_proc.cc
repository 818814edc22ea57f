// cuGetProcAddress and cuGetProcAddress_v2. Work before cuInit, as cudart relies on.
#include "api.h"
#include "proc_table.h"

using namespace chameleon::simgpu;

namespace {

CUresult Resolve(const char* symbol, void** pfn, int version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  constexpr cuuint64_t kKnown =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (flags & ~kKnown) return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  ProcStatus s = ProcStatus::kNotFound;
  *pfn = LookupProc(symbol, version, per_thread, &s);
  switch (s) {
    case ProcStatus::kFound:
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    case ProcStatus::kVersionTooLow:
      if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_ERROR_NOT_FOUND;
    case ProcStatus::kNotFound:
      break;
  }
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace

SIMGPU_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) try {
  SIMGPU_ENTRY();
  return Resolve(symbol, pfn, version, flags, status);
}
SIMGPU_CATCH

// The CUDA 11.3 ABI (no status argument). cuda.h only declares it for the driver's own build.
SIMGPU_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                     cuuint64_t flags) try {
  SIMGPU_ENTRY();
  return Resolve(symbol, pfn, version, flags, nullptr);
}
SIMGPU_CATCH
