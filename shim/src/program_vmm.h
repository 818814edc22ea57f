// Program VMM under the swap executor (docs/shim.md "Program VMM", docs/executor.md): the
// program's own cuMemCreate / cuMemMap (PyTorch's expandable segments) made swappable.
//
// While the executor is on, a cuMemCreate it can cover (device location on the executor's device,
// no shareable handle types, no special allocation flags, size a multiple of the executor's chunk)
// returns a *virtual* handle with no physical memory. cuMemMap of that handle (whole handle,
// offset 0) makes the range an executor allocation at the program's own VA (SwapEngine::Adopt);
// cuMemSetAccess on it succeeds, cuMemUnmap frees it synchronously (or parks its contents when
// the handle lives on, for a later map elsewhere), cuMemRelease drops the handle, and
// GetAllocationPropertiesFromHandle / RetainAllocationHandle answer from this registry. Anything
// else (exportable handles, host locations, other devices, odd sizes) passes through untouched
// and is never swapped.
//
// Soundness for tensors spanning pages: a launch names a tensor by its first address only, and
// the program's allocator carves tensors across its pages. So before an op, a named address in a
// virtualised page P makes resident P and every following page of the same contiguous mapped run
// (a tensor cannot cross an unmapped gap); copies and memsets carry their byte extents and use
// exactly the pages they cover (ProgramVmmBeforeOp).
//
// Layer (docs/shim.md, "Layers"): part of the executor, below executor.h. It drives the swap
// engine it is handed and reports what it creates, maps and unmaps to a VmmBookkeeping (the
// tracker, above it, implements one).
//
// Thread-safe: one registry mutex; the op path takes it only for ops naming a virtualised page.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace chameleon::shim {

namespace swap {
class SwapEngine;
}
struct AllocationState;

/// The allocation bookkeeping above the executor, told of the program's virtualised VMM (the
/// tracker implements it: tracker.h). Called with the registry mutex held, except Created and
/// Released.
class VmmBookkeeping {
 public:
  virtual ~VmmBookkeeping() = default;
  /// A virtual handle of `bytes` on `device`: the program's view, no physical memory yet.
  virtual void Created(CUmemGenericAllocationHandle handle, std::uint64_t bytes,
                       std::uint16_t device) = 0;
  /// The virtual handle is gone.
  virtual void Released(CUmemGenericAllocationHandle handle) = 0;
  /// A virtualised mapping, tracked as a swappable allocation: its state, null when the table is
  /// full.
  virtual AllocationState* Mapped(std::uint64_t address, std::uint64_t bytes,
                                  std::uint16_t device) = 0;
  /// Every mapping in [address, address + bytes) is gone.
  virtual void Unmapped(std::uint64_t address, std::uint64_t bytes) = 0;
};

/// The bytes an op touches through one of its tensors (copies, memsets).
struct OpExtent {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

/// True when `handle` is a live virtual handle.
bool ProgramVmmIsVirtual(CUmemGenericAllocationHandle handle);

/// cuMemCreate with the executor on (its `engine`, serving `device`): true when the request is
/// virtualised (`*result` is the call's result, `*handle` the virtual handle); false = pass it
/// through to the driver.
bool ProgramVmmCreate(swap::SwapEngine& engine, int device, VmmBookkeeping& book,
                      CUmemGenericAllocationHandle* handle, std::size_t bytes,
                      const CUmemAllocationProp* prop, unsigned long long flags, CUresult* result);
/// cuMemRelease: true when `handle` is virtual (`*result` set); false = the driver's handle.
/// `engine`: the executor's, null when off.
bool ProgramVmmRelease(swap::SwapEngine* engine, VmmBookkeeping& book,
                       CUmemGenericAllocationHandle handle, CUresult* result);
/// cuMemMap of a virtual handle: true when `handle` is virtual (`*result` set).
bool ProgramVmmMap(swap::SwapEngine* engine, VmmBookkeeping& book, CUdeviceptr ptr,
                   std::size_t bytes, std::size_t offset, CUmemGenericAllocationHandle handle,
                   unsigned long long flags, CUresult* result);
/// Before a driver cuMemMap of a real handle: INVALID_VALUE when the range overlaps a known
/// program mapping (a swapped-out page is unmapped in the driver, which would accept it).
CUresult ProgramVmmCheckRealMap(CUdeviceptr ptr, std::size_t bytes);
/// After a successful driver cuMemMap of a real handle: part of the program's mapped runs.
void ProgramVmmNoteRealMap(CUdeviceptr ptr, std::size_t bytes);

using ProgramUnmapFn = CUresult (*)(CUdeviceptr, std::size_t);
using ProgramSetAccessFn = CUresult (*)(CUdeviceptr, std::size_t, const CUmemAccessDesc*,
                                        std::size_t);
/// cuMemUnmap: true when the range holds a virtualised mapping (`*result` set; real mappings in
/// the range are unmapped through `real`, and every mapping is untracked). False: the caller
/// unmaps through the driver and calls ProgramVmmForgetRealMaps on success.
bool ProgramVmmUnmap(swap::SwapEngine* engine, VmmBookkeeping& book, CUdeviceptr ptr,
                     std::size_t bytes, ProgramUnmapFn real, CUresult* result);
void ProgramVmmForgetRealMaps(CUdeviceptr ptr, std::size_t bytes);
/// cuMemSetAccess: true when the range holds a virtualised mapping (`*result` set). `engine`
/// (serving `device`) is null when the executor is off.
bool ProgramVmmSetAccess(swap::SwapEngine* engine, int device, CUdeviceptr ptr, std::size_t bytes,
                         const CUmemAccessDesc* desc, std::size_t count, ProgramSetAccessFn real,
                         CUresult* result);
/// cuMemAddressFree: INVALID_VALUE while a virtualised mapping lies in the range (the driver
/// would free a reservation whose swapped-out pages it does not see as mapped).
CUresult ProgramVmmCheckAddressFree(CUdeviceptr ptr, std::size_t bytes);
/// cuMemGetAllocationPropertiesFromHandle of a virtual handle (true, `*result` set).
bool ProgramVmmProperties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle,
                          CUresult* result);
/// cuMemRetainAllocationHandle of an address in a virtualised mapping (true, `*result` set).
bool ProgramVmmRetain(CUmemGenericAllocationHandle* handle, void* address, CUresult* result);

/// The op-path hook (ExecutorBeforeOp, when a named tensor has kProgramVmmPage): makes resident
/// (PrepareUse, one engine call) every tensor the op names plus every virtualised page it may
/// reach — up to the end of the contiguous mapped run for a launch (`extents` null), exactly the
/// pages under `extents[i]` for a copy or memset — and records `stream` as their last user.
CUresult ProgramVmmBeforeOp(swap::SwapEngine& engine, CUstream stream,
                            AllocationState* const* states, std::uint32_t n,
                            const OpExtent* extents);

}  // namespace chameleon::shim
