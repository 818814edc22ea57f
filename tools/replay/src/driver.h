// The CUDA driver as chameleon-replay sees it: entry points resolved at run time.
//
// Like cudart (and the trainer), the replayer never links libcuda: it dlopen()s
// "libcuda.so.1", looks up cuGetProcAddress_v2 with dlsym and resolves everything else through it
// (cudaVersion 13000, flags 0), the path Chameleon's shim interposes.
#pragma once

#include <cuda.h>

#include <string>

#include "chameleon/driver_loader/driver_loader.h"

namespace chameleon::replay {

// `#name` is the base name given to cuGetProcAddress; `name` expands through cuda.h's macros to
// the ABI symbol of the current version, whose type cudaVersion 13000 returns.
#define REPLAY_DRIVER_ENTRY_POINTS(X) \
  X(cuInit)                           \
  X(cuDeviceGet)                      \
  X(cuDevicePrimaryCtxRetain)         \
  X(cuDevicePrimaryCtxRelease)        \
  X(cuCtxSetCurrent)                  \
  X(cuStreamCreate)                   \
  X(cuStreamDestroy)                  \
  X(cuStreamSynchronize)              \
  X(cuEventCreate)                    \
  X(cuEventRecord)                    \
  X(cuEventSynchronize)               \
  X(cuEventElapsedTime)               \
  X(cuEventDestroy)                   \
  X(cuModuleLoadData)                 \
  X(cuModuleUnload)                   \
  X(cuModuleGetFunction)              \
  X(cuLaunchKernel)                   \
  X(cuMemAlloc)                       \
  X(cuMemFree)                        \
  X(cuMemAllocAsync)                  \
  X(cuMemFreeAsync)                   \
  X(cuMemcpyHtoD)                     \
  X(cuMemcpyDtoH)                     \
  X(cuGetErrorName)

/// Resolved entry points. Construct once (not thread-safe); the calls are the driver's.
struct DriverApi {
#define REPLAY_DECLARE_MEMBER(name) decltype(&::name) name = nullptr;
  REPLAY_DRIVER_ENTRY_POINTS(REPLAY_DECLARE_MEMBER)
#undef REPLAY_DECLARE_MEMBER
};

using driver_loader::DriverError;
using driver_loader::OutOfMemory;

/// dlopen("libcuda.so.1") + cuGetProcAddress_v2 for every entry point. Throws DriverError.
DriverApi LoadDriver();

/// Throws OutOfMemory / DriverError naming `what` unless `result` is CUDA_SUCCESS.
void Check(const DriverApi& api, CUresult result, const std::string& what);

}  // namespace chameleon::replay
