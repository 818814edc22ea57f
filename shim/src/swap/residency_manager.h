// ResidencyManager: brings allocations back to the device when they are needed — the swap-in
// (reclaiming the old chunks without a copy when nobody reused them), the consumer's wait, the
// synchronous fault-in safety net — and prepares all tensors of an op under one lock.
//
// The host never waits here except on the counted slow paths: FaultIn, and a swap-in whose
// stale mapping must go while its swap-out copy is still running (UnmapBatcher::ForceUnmap).
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "swap/allocation_table.h"
#include "swap/evictor.h"
#include "swap/host_mapper.h"
#include "swap/swap_base.h"
#include "swap/transfer_scheduler.h"
#include "swap/unmap_batcher.h"

namespace chameleon::shim::swap {

class ResidencyManager {
 public:
  /// `skip_swap_in_wait`: fault injection (SwapEngineOptions), consumers do not wait.
  ResidencyManager(const SwapBase& base, bool skip_swap_in_wait, AllocationTable* table,
                   UnmapBatcher* unmaps, TransferScheduler* transfers, Evictor* evictor,
                   HostMapper* host_maps)
      : base_(base),
        skip_swap_in_wait_(skip_swap_in_wait),
        table_(table),
        unmaps_(unmaps),
        transfers_(transfers),
        evictor_(evictor),
        host_maps_(host_maps) {}

  /// Starts the swap-in of `a` on the in stream; no-op when resident. `count_stall`: false
  /// inside FaultIn, which counts its whole wait as one stall.
  CUresult SwapIn(Allocation* a, bool count_stall = true);
  /// Makes `consumer` wait until `a`'s data is back (a stream wait, never a host wait), starting
  /// the swap-in first if nobody did. Counts the first wait on each swap-in: issued ahead
  /// (`prefetches`) or only now (`late_swap_ins`), and a hit or miss by virtual time (CountWait).
  CUresult WaitResident(Allocation* a, CUstream consumer);
  /// Brings `a` back and waits on the host (a counted stall).
  /// `consumer`: the stream about to use it (else its last one), for fault_in_wait_ns.
  CUresult FaultIn(Allocation* a, CUstream consumer = nullptr);
  /// SwapEngine::PrepareUse (see there).
  CUresult PrepareUse(const AllocId* ids, std::size_t n, CUstream stream);
  /// SwapEngine::PrepareSpan (see there).
  CUresult PrepareSpan(const AllocId* named, std::size_t n, const AllocId* reach, std::size_t m,
                       CUstream stream);

 private:
  /// Unmapped, swapped out, its old chunks untouched in the pool: takes them back and maps them
  /// again (no copy). False if they were reused (or the map failed: nothing changed then).
  bool RemapReclaim(Allocation* a);
  /// Classifies the first consumer wait on `a`'s swap-in (a.ready set): a hit when, in virtual
  /// time and stream order, the copy ends no later than the consumer's next op would start
  /// (simgpu's clocks; the virtual wait is added to swap_in_wait_ns); on a real driver, when the
  /// copy has finished as the consumer is enqueued.
  // FaultIn's host wait as the consumer stream's idle time (fault_in_wait_ns).
  void CountFaultInWait(const Allocation& a, CUstream consumer);
  void CountWait(const Allocation& a, CUstream consumer, bool ahead);
  /// Marks the allocations of `ids` held (never evicted for the op being prepared) or not.
  void Hold(const AllocId* ids, std::size_t k, bool on);
  /// Makes the named allocation usable by `stream`: FaultIn when swapped out, else a wait.
  CUresult PrepareNamed(Allocation* a, CUstream stream);

  SwapBase base_;
  bool skip_swap_in_wait_;
  AllocationTable* table_;
  UnmapBatcher* unmaps_;
  TransferScheduler* transfers_;
  Evictor* evictor_;
  HostMapper* host_maps_;
};

}  // namespace chameleon::shim::swap
