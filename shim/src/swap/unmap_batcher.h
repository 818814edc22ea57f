// UnmapBatcher: the deferred unmaps of swapped-out and freed ranges, performed in batches
// (docs/executor.md, "Deferred unmapping").
//
// Why batches: cuMemUnmap synchronises the device (CUDA documents it so; simgpu models it), and
// nothing may use a range being unmapped. So a stale range is never unmapped on its own in the
// middle of an iteration: unmaps wait until their copy's fence completed and happen together —
// at flushes, or alongside the one a swap-in cannot avoid — one device synchronisation for all.
// Each batch also flushes the free-range cache's stale ranges.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "swap/allocation_table.h"
#include "swap/free_range_cache.h"
#include "swap/swap_base.h"

namespace chameleon::shim::swap {

class UnmapBatcher {
 public:
  UnmapBatcher(const SwapBase& base, AllocationTable* table, FreeRangeCache* free_ranges)
      : base_(base), table_(table), free_ranges_(free_ranges) {}

  /// Queues the unmap of [va, va + span) for when `fence` completes, taking the caller's
  /// reference. `id`: the swapped-out allocation (marked unmapped then), or 0 for a freed range
  /// (whose VA is released after the unmap).
  void Defer(AllocId id, CUdeviceptr va, std::size_t span, Fence* fence);
  /// `id`'s range keeps its mappings after all (a reclaim): drops its entry.
  void Cancel(AllocId id);
  /// `id` was freed while its unmap is pending: the entry now releases the VA too. False when
  /// nothing was pending (the caller releases the VA).
  bool Orphan(AllocId id);
  /// Unmaps `a`'s stale range now; true if it had to wait (on the host) for the copy.
  bool UnmapNow(Allocation* a);
  /// The swap-in of `a` needs its stale range unmapped: unmaps it and, in the same breath, every
  /// other pending range whose copy has completed (one device synchronisation covers them all).
  void ForceUnmap(Allocation* a, bool count_stall);
  /// Unmaps the pending ranges whose copies have completed (`all`: also those still in flight,
  /// waiting for them: counted stalls), then the free-range cache's stale ranges. Returns the
  /// number unmapped; a non-empty batch counts one device_syncs unless `count_sync` is false
  /// (the caller already synchronised the device).
  std::size_t Flush(bool all, bool count_sync = true);

  std::size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    AllocId id = 0;  // swapped-out allocation, or 0 for a freed range
    CUdeviceptr va = 0;
    std::size_t span = 0;
    Fence* fence = nullptr;
  };

  SwapBase base_;
  AllocationTable* table_;
  FreeRangeCache* free_ranges_;
  std::vector<Pending> pending_;
};

}  // namespace chameleon::shim::swap
