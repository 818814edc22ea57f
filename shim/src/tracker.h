// Allocation bookkeeping shared by the memory wrappers: the allocation table, per-device live and
// peak bytes, AllocRecord/FreeRecord emission, VMM handles and never-swap marks. Slow path
// (allocation calls), serialised by Runtime::tracker_mu so ids follow ring order.
//
// Layer (docs/shim.md, "Layers"): the op path. It calls nothing of the executor; program VMM
// (below) reports to it through VmmTracker.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "chameleon/ipc/event_records.h"
#include "program_vmm.h"
#include "runtime.h"

namespace chameleon::shim {

/// Allocations below this are never swapped (the VMM granularity the executor will use).
inline constexpr std::uint64_t kSwapGranularity = 2ull << 20;

/// Device of the calling thread's current context (0 when unknown). Cached per thread.
std::uint16_t CurrentDevice(const Runtime& rt);
/// The calling thread switched contexts (cuCtxSetCurrent, push/pop, create, destroy).
void InvalidateCurrentDevice();

/// A new live allocation [address, address + bytes) on `device`. `swappable`: 1 = yes (the
/// executor serves it), 0 = never (passed through while the executor is on), -1 = by size (the
/// daemon may plan it when >= kSwapGranularity). Returns its state (null when the table is full).
AllocationState* TrackAlloc(Runtime& rt, std::uint64_t address, std::uint64_t bytes,
                            ipc::AllocKind kind, std::uint64_t stream, std::uint16_t device,
                            bool counts_device_bytes, int swappable = -1);
/// The allocation starting at `address` is gone. Unknown addresses are ignored.
void TrackFree(Runtime& rt, std::uint64_t address, std::uint64_t stream, bool counts_device_bytes);

/// VMM: physical handles (device bytes) and mappings (the "tensors").
void TrackVmmCreate(Runtime& rt, CUmemGenericAllocationHandle handle, std::uint64_t bytes,
                    std::uint16_t device);
/// True (and `*released` filled) when `handle` was known.
bool TrackVmmRelease(Runtime& rt, CUmemGenericAllocationHandle handle, VmmHandle* released);
/// A driver handle's mapping. `never_swap`: the executor is on, and this memory stays the
/// program's (virtual handles are mapped by ProgramVmmMap instead).
void TrackVmmMap(Runtime& rt, std::uint64_t address, std::uint64_t bytes,
                 CUmemGenericAllocationHandle handle, bool never_swap);
void TrackVmmUnmap(Runtime& rt, std::uint64_t address, std::uint64_t bytes);

/// IPC / shareable export: the allocation (or every mapping of the handle) must never move.
void MarkNeverSwapAddress(Runtime& rt, std::uint64_t address);
void MarkNeverSwapHandle(Runtime& rt, CUmemGenericAllocationHandle handle);

/// The tracker as program VMM's bookkeeping (program_vmm.h): virtual handles count their device
/// bytes at creation, their mappings are swappable allocations. Thread-safe, as the functions
/// above; holds nothing but the runtime.
class VmmTracker final : public VmmBookkeeping {
 public:
  explicit VmmTracker(Runtime& rt) : rt_(rt) {}
  void Created(CUmemGenericAllocationHandle handle, std::uint64_t bytes,
               std::uint16_t device) override;
  void Released(CUmemGenericAllocationHandle handle) override;
  AllocationState* Mapped(std::uint64_t address, std::uint64_t bytes,
                          std::uint16_t device) override;
  void Unmapped(std::uint64_t address, std::uint64_t bytes) override;

 private:
  Runtime& rt_;
};

}  // namespace chameleon::shim
