// Exported allocation, free, VMM, memory-info and export entry points.
#include "executor.h"
#include "program_vmm.h"
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
using SetAccessFn = CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
using PropsFn = CUresult (*)(CUmemAllocationProp*, CUmemGenericAllocationHandle);
using RetainFn = CUresult (*)(CUmemGenericAllocationHandle*, void*);

std::uint64_t StreamValue(CUstream s, bool per_thread) {
  return reinterpret_cast<std::uint64_t>(EffectiveStream(s, per_thread));
}
}  // namespace

// With the swap executor on (executor.h), allocations of at least CHAMELEON_SWAP_MIN_BYTES on its
// device are served by the engine (VA-stable, swappable); smaller ones pass through, counted
// against the limit.

namespace {

/// A passed-through allocation on the executor's device: make room first, retry once if the
/// driver itself refuses (chunks the engine still holds, or its stale mappings, may be in the
/// way). On another device the executor holds nothing to give: making room there trimmed its
/// own pool for nothing, and on a 1F1B pipeline in one process (every later stage allocating on
/// its own device) each such trim unmapped stale ranges, a device synchronisation that drained
/// all four stages' queues, three times a step.
template <typename Call>
CUresult PassThroughAlloc(Executor* ex, std::uint16_t device, std::uint64_t bytes, Call&& call) {
  if (ex == nullptr || device != ex->device) return call();
  if (!ExecutorAdmit(*ex, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = call();
  // The driver's bookkeeping can lag ours (stream-ordered frees it has not executed yet): give
  // it chunks back until it agrees, or nothing is left to give.
  for (int i = 0; r == CUDA_ERROR_OUT_OF_MEMORY && i < 16; ++i) {
    if (!ex->engine->ReleaseBytes(bytes)) break;
    r = call();
  }
  return r;
}

/// An allocation the executor serves, tracked like the driver's (kind/stream as the wrapper would
/// record).
CUresult ExecutorAlloc(Runtime& rt, Executor& ex, CUdeviceptr* dptr, std::uint64_t bytes,
                       CUstream stream, ipc::AllocKind kind, std::uint64_t stream_value) {
  swap::AllocId id = 0;
  const CUresult r = ExecutorAllocate(ex, dptr, bytes, stream, &id);
  if (r != CUDA_SUCCESS) return r;
  AllocationState* s = TrackAlloc(rt, *dptr, bytes, kind, stream_value,
                                  static_cast<std::uint16_t>(ex.device), true, /*swappable=*/1);
  ExecutorAttach(ex, id, s, stream_value);
  return CUDA_SUCCESS;
}

template <typename Call>
CUresult AllocCommon(Runtime& rt, CUdeviceptr* dptr, std::uint64_t bytes, CUstream stream,
                     ipc::AllocKind kind, std::uint64_t stream_value, Call&& real_call) {
  Executor* ex = DecideExecutor(rt);
  if (ex != nullptr && dptr != nullptr && ExecutorServes(*ex, CurrentDevice(rt), bytes)) {
    return ExecutorAlloc(rt, *ex, dptr, bytes, stream, kind, stream_value);
  }
  const CUresult r = PassThroughAlloc(ex, CurrentDevice(rt), bytes, real_call);
  if (r == CUDA_SUCCESS && dptr != nullptr) {
    const std::uint16_t device = CurrentDevice(rt);
    if (TrackAlloc(rt, *dptr, bytes, kind, stream_value, device, true, ex != nullptr ? 0 : -1) &&
        ex != nullptr) {
      ExecutorPassthrough(*ex, device, bytes, true);
    }
  }
  return r;
}

/// Frees: the executor's own allocations go back to it; others to the driver.
template <typename Call>
CUresult FreeCommon(Runtime& rt, CUdeviceptr dptr, CUstream stream, std::uint64_t stream_value,
                    Call&& real_call) {
  Executor* ex = ExecutorIfOn();
  PassthroughFree passthrough;
  CUresult result = CUDA_SUCCESS;
  if (ex != nullptr && ExecutorFree(*ex, dptr, stream, &result, &passthrough)) {
    TrackFree(rt, dptr, stream_value, true);
    return result;
  }
  const CUresult r = real_call();
  if (r == CUDA_SUCCESS) {
    TrackFree(rt, dptr, stream_value, true);
    if (ex != nullptr && passthrough.bytes != 0) {
      ExecutorPassthrough(*ex, passthrough.device, passthrough.bytes, false);
    }
  }
  return r;
}

}  // namespace

CHAMELEON_WRAPPER(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytes)) {
  Runtime& rt = EnterTracked(kSym_cuMemAlloc_v2);
  CHAMELEON_REAL(rt, cuMemAlloc_v2, AllocFn);
  if (!Tracking(rt)) return real(dptr, bytes);
  return AllocCommon(rt, dptr, bytes, nullptr, ipc::AllocKind::kPlain, 0,
                     [&] { return real(dptr, bytes); });
}

CHAMELEON_WRAPPER(cuMemAllocPitch_v2, (CUdeviceptr * dptr, size_t* pitch, size_t width,
                                       size_t height, unsigned int element_bytes)) {
  Runtime& rt = EnterTracked(kSym_cuMemAllocPitch_v2);
  CHAMELEON_REAL(rt, cuMemAllocPitch_v2, AllocPitchFn);
  if (!Tracking(rt)) return real(dptr, pitch, width, height, element_bytes);
  Executor* ex = DecideExecutor(rt);
  const bool valid = dptr != nullptr && pitch != nullptr && width != 0 && height != 0 &&
                     (element_bytes == 4 || element_bytes == 8 || element_bytes == 16);
  // Rows aligned to 512 bytes, as drivers do; invalid arguments get the driver's own error.
  const std::uint64_t row = (static_cast<std::uint64_t>(width) + 511) / 512 * 512;
  if (ex != nullptr && valid && ExecutorServes(*ex, CurrentDevice(rt), row * height)) {
    const CUresult r =
        ExecutorAlloc(rt, *ex, dptr, row * height, nullptr, ipc::AllocKind::kPlain, 0);
    if (r == CUDA_SUCCESS) *pitch = row;
    return r;
  }
  // The size is known only after the call: admit the request's minimum.
  const CUresult r =
      PassThroughAlloc(ex, CurrentDevice(rt), static_cast<std::uint64_t>(width) * height,
                       [&] { return real(dptr, pitch, width, height, element_bytes); });
  if (r == CUDA_SUCCESS && dptr != nullptr && pitch != nullptr) {
    const std::uint16_t device = CurrentDevice(rt);
    if (TrackAlloc(rt, *dptr, *pitch * height, ipc::AllocKind::kPlain, 0, device, true,
                   ex != nullptr ? 0 : -1) &&
        ex != nullptr) {
      ExecutorPassthrough(*ex, device, *pitch * height, true);
    }
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemFree_v2, (CUdeviceptr dptr)) {
  Runtime& rt = Enter(kSym_cuMemFree_v2);
  CHAMELEON_REAL(rt, cuMemFree_v2, FreeFn);
  if (!Tracking(rt)) return real(dptr);
  const CUresult r = FreeCommon(rt, dptr, nullptr, 0, [&] { return real(dptr); });
  // The real free synchronises the device anyway: pending unmaps are due.
  if (Executor* ex = ExecutorIfOn()) ExecutorAfterSync(*ex);
  return r;
}

#define CHAMELEON_ALLOC_ASYNC(NAME, PT)                                                 \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr * dptr, size_t bytes, CUstream s)) {             \
    Runtime& rt = EnterTracked(kSym_##NAME);                                            \
    CHAMELEON_REAL(rt, NAME, AllocAsyncFn);                                             \
    if (!Tracking(rt)) return real(dptr, bytes, s);                                     \
    return AllocCommon(rt, dptr, bytes, EffectiveStream(s, PT), ipc::AllocKind::kAsync, \
                       StreamValue(s, PT), [&] { return real(dptr, bytes, s); });       \
  }
CHAMELEON_ALLOC_ASYNC(cuMemAllocAsync, false)
CHAMELEON_ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)

// Pool attributes (location, handle types) are not looked at: an allocation the executor serves
// comes from its chunks, not from `pool`.
#define CHAMELEON_ALLOC_POOL(NAME, PT)                                                         \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr * dptr, size_t bytes, CUmemoryPool pool, CUstream s)) { \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                   \
    CHAMELEON_REAL(rt, NAME, AllocPoolFn);                                                     \
    if (!Tracking(rt)) return real(dptr, bytes, pool, s);                                      \
    return AllocCommon(rt, dptr, bytes, EffectiveStream(s, PT), ipc::AllocKind::kAsync,        \
                       StreamValue(s, PT), [&] { return real(dptr, bytes, pool, s); });        \
  }
CHAMELEON_ALLOC_POOL(cuMemAllocFromPoolAsync, false)
CHAMELEON_ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz, true)

#define CHAMELEON_FREE_ASYNC(NAME, PT)                                      \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dptr, CUstream s)) {                 \
    Runtime& rt = Enter(kSym_##NAME);                                       \
    CHAMELEON_REAL(rt, NAME, FreeAsyncFn);                                  \
    if (!Tracking(rt)) return real(dptr, s);                                \
    return FreeCommon(rt, dptr, EffectiveStream(s, PT), StreamValue(s, PT), \
                      [&] { return real(dptr, s); });                       \
  }
CHAMELEON_FREE_ASYNC(cuMemFreeAsync, false)
CHAMELEON_FREE_ASYNC(cuMemFreeAsync_ptsz, true)

CHAMELEON_WRAPPER(cuMemCreate, (CUmemGenericAllocationHandle * handle, size_t bytes,
                                const CUmemAllocationProp* prop, unsigned long long flags)) {
  Runtime& rt = EnterTracked(kSym_cuMemCreate);
  CHAMELEON_REAL(rt, cuMemCreate, CreateFn);
  if (!Tracking(rt)) return real(handle, bytes, prop, flags);
  const bool on_device = prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                         prop->location.id >= 0;
  const std::uint16_t device = on_device ? static_cast<std::uint16_t>(prop->location.id) : 0;
  Executor* ex = on_device ? DecideExecutor(rt) : nullptr;
  if (ex != nullptr && device != ex->device) ex = nullptr;
  VmmTracker book(rt);
  // A handle the executor can serve is virtual (program_vmm.h): memory only once mapped.
  if (CUresult virtual_result;
      ex != nullptr && ProgramVmmCreate(*ex->engine, ex->device, book, handle, bytes, prop, flags,
                                        &virtual_result)) {
    return virtual_result;
  }
  // Any other handle is the program's own physical memory: never swapped, but counted against
  // the limit.
  const CUresult r =
      PassThroughAlloc(ex, device, bytes, [&] { return real(handle, bytes, prop, flags); });
  if (r == CUDA_SUCCESS && handle != nullptr) {
    if (on_device) {
      TrackVmmCreate(rt, *handle, bytes, device);
      if (ex != nullptr) ExecutorPassthrough(*ex, device, bytes, true);
    }
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemRelease, (CUmemGenericAllocationHandle handle)) {
  Runtime& rt = Enter(kSym_cuMemRelease);
  CHAMELEON_REAL(rt, cuMemRelease, ReleaseFn);
  VmmTracker book(rt);
  Executor* const ex = ExecutorIfOn();
  if (CUresult virtual_result;
      Tracking(rt) && ProgramVmmRelease(ex != nullptr ? ex->engine.get() : nullptr, book, handle,
                                        &virtual_result)) {
    return virtual_result;
  }
  const CUresult r = real(handle);
  if (r == CUDA_SUCCESS && Tracking(rt)) {
    VmmHandle released;
    if (TrackVmmRelease(rt, handle, &released)) {
      if (Executor* on = ExecutorIfOn()) {
        ExecutorPassthrough(*on, released.device, released.bytes, false);
      }
    }
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemMap, (CUdeviceptr ptr, size_t bytes, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)) {
  Runtime& rt = EnterTracked(kSym_cuMemMap);
  CHAMELEON_REAL(rt, cuMemMap, MapFn);
  if (!Tracking(rt)) return real(ptr, bytes, offset, handle, flags);
  Executor* const ex = ExecutorIfOn();
  VmmTracker book(rt);
  if (CUresult virtual_result; ProgramVmmMap(ex != nullptr ? ex->engine.get() : nullptr, book, ptr,
                                             bytes, offset, handle, flags, &virtual_result)) {
    return virtual_result;
  }
  if (const CUresult e = ProgramVmmCheckRealMap(ptr, bytes); e != CUDA_SUCCESS) return e;
  const CUresult r = real(ptr, bytes, offset, handle, flags);
  if (r == CUDA_SUCCESS) {
    TrackVmmMap(rt, ptr, bytes, handle, /*never_swap=*/ExecutorIfOn() != nullptr);
    ProgramVmmNoteRealMap(ptr, bytes);
  }
  return r;
}

CHAMELEON_WRAPPER(cuMemUnmap, (CUdeviceptr ptr, size_t bytes)) {
  Runtime& rt = Enter(kSym_cuMemUnmap);
  CHAMELEON_REAL(rt, cuMemUnmap, UnmapFn);
  if (!Tracking(rt)) return real(ptr, bytes);
  Executor* const ex = ExecutorIfOn();
  VmmTracker book(rt);
  if (CUresult virtual_result; ProgramVmmUnmap(ex != nullptr ? ex->engine.get() : nullptr, book,
                                               ptr, bytes, real, &virtual_result)) {
    return virtual_result;
  }
  const CUresult r = real(ptr, bytes);
  if (r == CUDA_SUCCESS) {
    TrackVmmUnmap(rt, ptr, bytes);
    ProgramVmmForgetRealMaps(ptr, bytes);
  }
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
  if (Tracking(rt)) {
    if (const CUresult e = ProgramVmmCheckAddressFree(ptr, bytes); e != CUDA_SUCCESS) return e;
  }
  return real(ptr, bytes);
}

// Under the executor the program sees its limit, not the device: total = limit, free = limit
// minus executor chunks in use and passed-through bytes.
CHAMELEON_WRAPPER(cuMemGetInfo_v2, (size_t * free_bytes, size_t* total_bytes)) {
  Runtime& rt = EnterTracked(kSym_cuMemGetInfo_v2);
  CHAMELEON_REAL(rt, cuMemGetInfo_v2, GetInfoFn);
  const CUresult r = real(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS || !Tracking(rt)) return r;
  Executor* ex = DecideExecutor(rt);
  if (ex != nullptr && CurrentDevice(rt) == ex->device)
    ExecutorMemInfo(*ex, free_bytes, total_bytes);
  return r;
}

CHAMELEON_WRAPPER(cuIpcGetMemHandle, (CUipcMemHandle * handle, CUdeviceptr dptr)) {
  Runtime& rt = Enter(kSym_cuIpcGetMemHandle);
  CHAMELEON_REAL(rt, cuIpcGetMemHandle, IpcGetFn);
  if (Tracking(rt)) {
    if (Executor* ex = ExecutorIfOn()) ExecutorPin(*ex, dptr);
  }
  const CUresult r = real(handle, dptr);
  if (r == CUDA_SUCCESS && Tracking(rt)) MarkNeverSwapAddress(rt, dptr);
  return r;
}

CHAMELEON_WRAPPER(cuMemExportToShareableHandle,
                  (void* shareable, CUmemGenericAllocationHandle handle,
                   CUmemAllocationHandleType type, unsigned long long flags)) {
  Runtime& rt = Enter(kSym_cuMemExportToShareableHandle);
  CHAMELEON_REAL(rt, cuMemExportToShareableHandle, ExportFn);
  // A virtual handle was created without shareable handle types: the driver's refusal.
  if (Tracking(rt) && ProgramVmmIsVirtual(handle)) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = real(shareable, handle, type, flags);
  if (r == CUDA_SUCCESS && Tracking(rt)) MarkNeverSwapHandle(rt, handle);
  return r;
}

// Virtualised mappings (program_vmm.h) get the engine's access on every map; the driver's own
// mappings in the range get the call.
CHAMELEON_WRAPPER(cuMemSetAccess,
                  (CUdeviceptr ptr, size_t bytes, const CUmemAccessDesc* desc, size_t count)) {
  Runtime& rt = Enter(kSym_cuMemSetAccess);
  CHAMELEON_REAL(rt, cuMemSetAccess, SetAccessFn);
  Executor* const ex = ExecutorIfOn();
  if (CUresult virtual_result;
      Tracking(rt) && ProgramVmmSetAccess(ex != nullptr ? ex->engine.get() : nullptr,
                                          ex != nullptr ? ex->device : 0, ptr, bytes, desc, count,
                                          real, &virtual_result)) {
    return virtual_result;
  }
  return real(ptr, bytes, desc, count);
}

CHAMELEON_WRAPPER(cuMemGetAllocationPropertiesFromHandle,
                  (CUmemAllocationProp * prop, CUmemGenericAllocationHandle handle)) {
  Runtime& rt = Enter(kSym_cuMemGetAllocationPropertiesFromHandle);
  CHAMELEON_REAL(rt, cuMemGetAllocationPropertiesFromHandle, PropsFn);
  if (CUresult virtual_result;
      Tracking(rt) && ProgramVmmProperties(prop, handle, &virtual_result)) {
    return virtual_result;
  }
  return real(prop, handle);
}

CHAMELEON_WRAPPER(cuMemRetainAllocationHandle,
                  (CUmemGenericAllocationHandle * handle, void* address)) {
  Runtime& rt = Enter(kSym_cuMemRetainAllocationHandle);
  CHAMELEON_REAL(rt, cuMemRetainAllocationHandle, RetainFn);
  if (CUresult virtual_result; Tracking(rt) && ProgramVmmRetain(handle, address, &virtual_result)) {
    return virtual_result;
  }
  return real(handle, address);
}
