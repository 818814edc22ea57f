// Shared by the files that define exported driver entry points (extern "C", exact ABI names).
#pragma once

#include <cuda.h>

// simgpu also exports the older ABI variants under their bare names (cudaVersion-based lookups of
// cuGetProcAddress hand them out), so the header's "bare name -> _vN" macros must not apply here.
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxSetFlags
#undef cuDevicePrimaryCtxReset
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuEventElapsedTime
#undef cuGetProcAddress
#undef cuDeviceGetUuid

#include "call_counter.h"
#include "driver.h"
#include "stream.h"

/// Marks an exported driver entry point. The version script exports cu* / simgpu* only.
#define SIMGPU_API extern "C" __attribute__((visibility("default")))

namespace chameleon::simgpu {
/// Maps the exception being handled to a CUresult (bad_alloc: out of memory).
CUresult CurrentExceptionResult() noexcept;
}  // namespace chameleon::simgpu

/// Closes every exported entry point's function-try-block: no exception crosses the C ABI.
#define SIMGPU_CATCH                                      \
  catch (...) {                                           \
    return ::chameleon::simgpu::CurrentExceptionResult(); \
  }

/// Returns early with `expr`'s result unless it is CUDA_SUCCESS.
#define SIMGPU_TRY(expr)                                     \
  do {                                                       \
    CUresult simgpu_try_r_ = (expr);                         \
    if (simgpu_try_r_ != CUDA_SUCCESS) return simgpu_try_r_; \
  } while (0)
