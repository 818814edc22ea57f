// Exported allocation, free, VMM, memory-info and export entry points.
#include "tracker.h"
#include "wrapper_util.h"

using namespace chameleon::shim;
namespace ipc = chameleon::ipc;

namespace {
using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using AllocPitchFn = CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
using FreeFn = CUresult (*)(CUdeviceptr);
using AllocAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using AllocPoolFn = CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
using FreeAsyncFn = CUresult (*)(CUdeviceptr, CUstream);
using CreateFn = CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                              unsigned long long);
using ReleaseFn = CUresult (*)(CUmemGenericAllocationHandle);
using MapFn = CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
using UnmapFn = CUresult (*)(CUdeviceptr, size_t);
using ReserveFn = CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
using AddressFreeFn = CUresult (*)(CUdeviceptr, size_t);
using GetInfoFn = CUresult (*)(size_t*, size_t*);
using IpcGetFn = CUresult (*)(CUipcMemHandle*, CUdeviceptr);
using ExportFn = CUresult (*)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                              unsigned long long);

std::uint64_t StreamValue(CUstream s, bool per_thread) {
  return reinterpret_cast<std::uint64_t>(EffectiveStream(s, per_thread));
}
}  // namespace

CHAMELEON_WRAPPER(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytes)) {
  Runtime& rt = Enter(kSym_cuMemAlloc_v2);
  CHAMELEON_REAL(rt, cuMemAlloc_v2, AllocFn);
  const CUresult r = real(dptr, bytes);
  if (r == CUDA_SUCCESS && Tracking(rt) && dptr != nullptr) {
    RecordingOps(rt);  // starts the daemon client on the first tracked call
    TrackAlloc(rt, *dptr, bytes, ipc::AllocKind::kPlain, 0, CurrentDevice(rt), true);
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemAllocPitch_v2, (CUdeviceptr * dptr, size_t* pitch, size_t width,
                                       size_t height, unsigned int element_bytes)) {
  Runtime& rt = Enter(kSym_cuMemAllocPitch_v2);
  CHAMELEON_REAL(rt, cuMemAllocPitch_v2, AllocPitchFn);
  const CUresult r = real(dptr, pitch, width, height, element_bytes);
  if (r == CUDA_SUCCESS && Tracking(rt) && dptr != nullptr && pitch != nullptr) {
    RecordingOps(rt);
    TrackAlloc(rt, *dptr, *pitch * height, ipc::AllocKind::kPlain, 0, CurrentDevice(rt), true);
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemFree_v2, (CUdeviceptr dptr)) {
  Runtime& rt = Enter(kSym_cuMemFree_v2);
  CHAMELEON_REAL(rt, cuMemFree_v2, FreeFn);
  const CUresult r = real(dptr);
  if (r == CUDA_SUCCESS && Tracking(rt)) TrackFree(rt, dptr, 0, true);
  return r;
}

#define CHAMELEON_ALLOC_ASYNC(NAME, PT)                                                           \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr * dptr, size_t bytes, CUstream s)) {                       \
    Runtime& rt = Enter(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, AllocAsyncFn);                                                       \
    const CUresult r = real(dptr, bytes, s);                                                      \
    if (r == CUDA_SUCCESS && Tracking(rt) && dptr != nullptr) {                                   \
      RecordingOps(rt);                                                                           \
      TrackAlloc(rt, *dptr, bytes, ipc::AllocKind::kAsync, StreamValue(s, PT), CurrentDevice(rt), \
                 true);                                                                           \
    }                                                                                             \
    return r;                                                                                     \
  }
CHAMELEON_ALLOC_ASYNC(cuMemAllocAsync, false)
CHAMELEON_ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)

#define CHAMELEON_ALLOC_POOL(NAME, PT)                                                            \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr * dptr, size_t bytes, CUmemoryPool pool, CUstream s)) {    \
    Runtime& rt = Enter(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, AllocPoolFn);                                                        \
    const CUresult r = real(dptr, bytes, pool, s);                                                \
    if (r == CUDA_SUCCESS && Tracking(rt) && dptr != nullptr) {                                   \
      RecordingOps(rt);                                                                           \
      TrackAlloc(rt, *dptr, bytes, ipc::AllocKind::kAsync, StreamValue(s, PT), CurrentDevice(rt), \
                 true);                                                                           \
    }                                                                                             \
    return r;                                                                                     \
  }
CHAMELEON_ALLOC_POOL(cuMemAllocFromPoolAsync, false)
CHAMELEON_ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz, true)

#define CHAMELEON_FREE_ASYNC(NAME, PT)                                                    \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dptr, CUstream s)) {                               \
    Runtime& rt = Enter(kSym_##NAME);                                                     \
    CHAMELEON_REAL(rt, NAME, FreeAsyncFn);                                                \
    const CUresult r = real(dptr, s);                                                     \
    if (r == CUDA_SUCCESS && Tracking(rt)) TrackFree(rt, dptr, StreamValue(s, PT), true); \
    return r;                                                                             \
  }
CHAMELEON_FREE_ASYNC(cuMemFreeAsync, false)
CHAMELEON_FREE_ASYNC(cuMemFreeAsync_ptsz, true)

CHAMELEON_WRAPPER(cuMemCreate, (CUmemGenericAllocationHandle * handle, size_t bytes,
                                const CUmemAllocationProp* prop, unsigned long long flags)) {
  Runtime& rt = Enter(kSym_cuMemCreate);
  CHAMELEON_REAL(rt, cuMemCreate, CreateFn);
  const CUresult r = real(handle, bytes, prop, flags);
  if (r == CUDA_SUCCESS && Tracking(rt) && handle != nullptr) {
    RecordingOps(rt);
    std::uint16_t device = 0;
    if (prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        prop->location.id >= 0) {
      device = static_cast<std::uint16_t>(prop->location.id);
    }
    TrackVmmCreate(rt, *handle, bytes, device);
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemRelease, (CUmemGenericAllocationHandle handle)) {
  Runtime& rt = Enter(kSym_cuMemRelease);
  CHAMELEON_REAL(rt, cuMemRelease, ReleaseFn);
  const CUresult r = real(handle);
  if (r == CUDA_SUCCESS && Tracking(rt)) TrackVmmRelease(rt, handle);
  return r;
}

CHAMELEON_WRAPPER(cuMemMap, (CUdeviceptr ptr, size_t bytes, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)) {
  Runtime& rt = Enter(kSym_cuMemMap);
  CHAMELEON_REAL(rt, cuMemMap, MapFn);
  const CUresult r = real(ptr, bytes, offset, handle, flags);
  if (r == CUDA_SUCCESS && Tracking(rt)) {
    RecordingOps(rt);
    TrackVmmMap(rt, ptr, bytes, handle);
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemUnmap, (CUdeviceptr ptr, size_t bytes)) {
  Runtime& rt = Enter(kSym_cuMemUnmap);
  CHAMELEON_REAL(rt, cuMemUnmap, UnmapFn);
  const CUresult r = real(ptr, bytes);
  if (r == CUDA_SUCCESS && Tracking(rt)) TrackVmmUnmap(rt, ptr, bytes);
  return r;
}

// Reservations are address space only: counted, not tracked (the mappings are the tensors).
CHAMELEON_WRAPPER(cuMemAddressReserve, (CUdeviceptr * ptr, size_t bytes, size_t alignment,
                                        CUdeviceptr addr, unsigned long long flags)) {
  Runtime& rt = Enter(kSym_cuMemAddressReserve);
  CHAMELEON_REAL(rt, cuMemAddressReserve, ReserveFn);
  return real(ptr, bytes, alignment, addr, flags);
}

CHAMELEON_WRAPPER(cuMemAddressFree, (CUdeviceptr ptr, size_t bytes)) {
  Runtime& rt = Enter(kSym_cuMemAddressFree);
  CHAMELEON_REAL(rt, cuMemAddressFree, AddressFreeFn);
  return real(ptr, bytes);
}

// Pass-through today; the swap executor (issue 9) reports its limit here when one is set.
CHAMELEON_WRAPPER(cuMemGetInfo_v2, (size_t * free_bytes, size_t* total_bytes)) {
  Runtime& rt = Enter(kSym_cuMemGetInfo_v2);
  CHAMELEON_REAL(rt, cuMemGetInfo_v2, GetInfoFn);
  return real(free_bytes, total_bytes);
}

CHAMELEON_WRAPPER(cuIpcGetMemHandle, (CUipcMemHandle * handle, CUdeviceptr dptr)) {
  Runtime& rt = Enter(kSym_cuIpcGetMemHandle);
  CHAMELEON_REAL(rt, cuIpcGetMemHandle, IpcGetFn);
  const CUresult r = real(handle, dptr);
  if (r == CUDA_SUCCESS && Tracking(rt)) MarkNeverSwapAddress(rt, dptr);
  return r;
}

CHAMELEON_WRAPPER(cuMemExportToShareableHandle,
                  (void* shareable, CUmemGenericAllocationHandle handle,
                   CUmemAllocationHandleType type, unsigned long long flags)) {
  Runtime& rt = Enter(kSym_cuMemExportToShareableHandle);
  CHAMELEON_REAL(rt, cuMemExportToShareableHandle, ExportFn);
  const CUresult r = real(shareable, handle, type, flags);
  if (r == CUDA_SUCCESS && Tracking(rt)) MarkNeverSwapHandle(rt, handle);
  return r;
}
