// The driver entry points chameleon-probe uses, resolved through dlopen("libcuda.so.1") and
// cuGetProcAddress (tools/driver_loader), so the probe links no CUDA library and runs on simgpu
// and on any real driver alike. No kernels: only copies, events, contexts and VMM.
#pragma once

#include <cuda.h>

#include <string>

namespace chameleon::probe {

#define CHAMELEON_PROBE_ENTRY_POINTS(X) \
  X(cuInit)                             \
  X(cuGetErrorName)                     \
  X(cuDeviceGetCount)                   \
  X(cuDeviceGet)                        \
  X(cuDeviceGetName)                    \
  X(cuDeviceGetAttribute)               \
  X(cuDeviceCanAccessPeer)              \
  X(cuDevicePrimaryCtxRetain)           \
  X(cuDevicePrimaryCtxRelease)          \
  X(cuCtxSetCurrent)                    \
  X(cuCtxEnablePeerAccess)              \
  X(cuStreamCreate)                     \
  X(cuStreamDestroy)                    \
  X(cuStreamSynchronize)                \
  X(cuEventCreate)                      \
  X(cuEventDestroy)                     \
  X(cuEventRecord)                      \
  X(cuEventSynchronize)                 \
  X(cuEventElapsedTime)                 \
  X(cuMemAlloc)                         \
  X(cuMemFree)                          \
  X(cuMemHostAlloc)                     \
  X(cuMemFreeHost)                      \
  X(cuMemHostRegister)                  \
  X(cuMemHostUnregister)                \
  X(cuMemcpyHtoDAsync)                  \
  X(cuMemcpyDtoHAsync)                  \
  X(cuMemcpyPeerAsync)                  \
  X(cuMemAddressReserve)                \
  X(cuMemAddressFree)                   \
  X(cuMemCreate)                        \
  X(cuMemRelease)                       \
  X(cuMemMap)                           \
  X(cuMemUnmap)                         \
  X(cuMemSetAccess)                     \
  X(cuMemGetAllocationGranularity)

/// Resolved entry points. Construct once (not thread-safe); the calls are the driver's.
struct ProbeDriver {
#define CHAMELEON_PROBE_MEMBER(name) decltype(&::name) name = nullptr;
  CHAMELEON_PROBE_ENTRY_POINTS(CHAMELEON_PROBE_MEMBER)
#undef CHAMELEON_PROBE_MEMBER

  /// Throws driver_loader::DriverError naming `what` unless `result` is CUDA_SUCCESS.
  void Check(CUresult result, const std::string& what) const;
};

/// Loads the driver, resolves every entry point and calls cuInit(0). Throws DriverError.
ProbeDriver LoadProbeDriver();

}  // namespace chameleon::probe
