// The CUDA driver as the trainer sees it: a table of entry points resolved at run time.
//
// The trainer never links libcuda. Like cudart, it dlopen()s "libcuda.so.1", looks up
// cuGetProcAddress_v2 with dlsym and resolves every other entry point through it (cudaVersion
// 13000, flags 0). That is the path an interposer such as Chameleon's shim must catch, so the
// trainer exercises it on every run.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "chameleon/driver_loader/driver_loader.h"

namespace chameleon::train_sim {

// X-macro of the entry points the trainer uses. `#name` is the base name handed to
// cuGetProcAddress ("cuMemAlloc"); `name` itself expands through cuda.h's macros to the ABI
// symbol of the current version (cuMemAlloc_v2), whose type is what cudaVersion 13000 returns.
#define TRAIN_SIM_DRIVER_ENTRY_POINTS(X) \
  X(cuInit)                              \
  X(cuDeviceGet)                         \
  X(cuDeviceGetCount)                    \
  X(cuDeviceCanAccessPeer)               \
  X(cuCtxEnablePeerAccess)               \
  X(cuDeviceTotalMem)                    \
  X(cuDevicePrimaryCtxRetain)            \
  X(cuDevicePrimaryCtxRelease)           \
  X(cuCtxSetCurrent)                     \
  X(cuCtxSynchronize)                    \
  X(cuStreamCreate)                      \
  X(cuStreamDestroy)                     \
  X(cuStreamSynchronize)                 \
  X(cuStreamWaitEvent)                   \
  X(cuEventCreate)                       \
  X(cuEventRecord)                       \
  X(cuEventSynchronize)                  \
  X(cuEventElapsedTime)                  \
  X(cuEventDestroy)                      \
  X(cuModuleLoadData)                    \
  X(cuModuleUnload)                      \
  X(cuModuleGetFunction)                 \
  X(cuLaunchKernel)                      \
  X(cuMemAlloc)                          \
  X(cuMemFree)                           \
  X(cuMemAllocAsync)                     \
  X(cuMemFreeAsync)                      \
  X(cuMemcpyHtoD)                        \
  X(cuMemcpyDtoH)                        \
  X(cuMemcpyHtoDAsync)                   \
  X(cuMemcpyDtoHAsync)                   \
  X(cuMemcpyPeerAsync)                   \
  X(cuMemAddressReserve)                 \
  X(cuMemAddressFree)                    \
  X(cuMemCreate)                         \
  X(cuMemRelease)                        \
  X(cuMemMap)                            \
  X(cuMemUnmap)                          \
  X(cuMemSetAccess)                      \
  X(cuMemGetAllocationGranularity)       \
  X(cuGetErrorName)

/// Resolved driver entry points. Not thread-safe to construct; the calls themselves are the
/// driver's and as thread-safe as the driver.
struct DriverApi {
#define TRAIN_SIM_DECLARE_MEMBER(name) decltype(&::name) name = nullptr;
  TRAIN_SIM_DRIVER_ENTRY_POINTS(TRAIN_SIM_DECLARE_MEMBER)
#undef TRAIN_SIM_DECLARE_MEMBER

  /// simgpu-only query (absent on a real driver): physical bytes live / at their maximum.
  int (*simgpu_physical_usage)(int, std::uint64_t*, std::uint64_t*) = nullptr;
};

using driver_loader::DriverError;
using driver_loader::OutOfMemory;

/// Loads "libcuda.so.1" (found through the library path, e.g. LD_LIBRARY_PATH=build/simgpu) and
/// resolves every entry point through cuGetProcAddress_v2. Throws DriverError with a clear
/// message when the library or a symbol is missing.
DriverApi LoadDriver();

/// Throws OutOfMemory for CUDA_ERROR_OUT_OF_MEMORY and DriverError for any other failure;
/// `what` names the call (and its size, for allocations) in the message.
void Check(const DriverApi& api, CUresult result, const std::string& what);

}  // namespace chameleon::train_sim
