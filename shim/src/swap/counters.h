// The executor's counters. Written by the executor (relaxed atomics: each is an independent
// monotonic count or gauge), read by the shim's publisher and by tests from any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "chameleon/ipc/segment_layout.h"

namespace chameleon::shim::swap {

/// Thread-safe: every field is an atomic updated with relaxed ordering.
struct SwapCounters {
  // --- published in SegmentHeader slot 5 (same names) ---
  std::atomic<std::uint64_t> swap_out_bytes{0};
  std::atomic<std::uint64_t> swap_in_bytes{0};    ///< bytes copied host -> device
  std::atomic<std::uint64_t> stall_count{0};      ///< host waits by the executor (see stall_ns)
  std::atomic<std::uint64_t> stall_ns{0};         ///< wall time of those waits
  std::atomic<std::uint64_t> prefetch_hits{0};    ///< swap-in complete when its consumer arrived
  std::atomic<std::uint64_t> host_pool_bytes{0};  ///< pinned bytes held by the host pool (gauge)
  std::atomic<std::uint64_t> vmm_calls{0};        ///< every driver VMM call the executor made
  // --- executor detail (docs/executor.md) ---
  std::atomic<std::uint64_t> prefetch_misses{0};  ///< consumer had to wait on the device
  std::atomic<std::uint64_t> chunk_creates{0};    ///< cuMemCreate (pool miss)
  std::atomic<std::uint64_t> chunk_reuses{0};     ///< chunk taken from the pool
  std::atomic<std::uint64_t> chunk_bytes{0};      ///< physical bytes created (gauge, <= limit)
  std::atomic<std::uint64_t> unmaps{0};           ///< deferred unmaps performed
  std::atomic<std::uint64_t> forced_unmaps{0};    ///< unmaps done on a swap-in (counted stalls)
  std::atomic<std::uint64_t> reclaims{0};        ///< swap-ins served by the still-intact old chunks
  std::atomic<std::uint64_t> evictions{0};       ///< OOM evictions (closest-size rule)
  std::atomic<std::uint64_t> fault_ins{0};       ///< safety-net synchronous swap-ins
  std::atomic<std::uint64_t> host_pool_full{0};  ///< swap-outs refused by the host cap
  std::atomic<std::uint64_t> policy_ignored{0};  ///< policy entries that matched nothing live
  std::atomic<std::uint64_t> policy_generation{0};  ///< generation in force
  // --- vmm_calls split by kind (their sum is vmm_calls) and device-wide synchronisations ---
  std::atomic<std::uint64_t> vmm_maps{0};      ///< cuMemMap + cuMemSetAccess
  std::atomic<std::uint64_t> vmm_unmaps{0};    ///< cuMemUnmap (== unmaps)
  std::atomic<std::uint64_t> vmm_reserves{0};  ///< cuMemAddressReserve + cuMemAddressFree
  std::atomic<std::uint64_t> vmm_creates{0};   ///< cuMemCreate + cuMemRelease (pooling: ~0)
  /// Engine-caused device-wide synchronisations: batches of cuMemUnmap (the first of a batch
  /// synchronises the device on simgpu; CUDA documents cuMemUnmap as synchronising) and drains.
  std::atomic<std::uint64_t> device_syncs{0};
  std::atomic<std::uint64_t> remap_reclaims{0};  ///< reclaims that had to map the chunks again
  std::atomic<std::uint64_t> range_reuses{0};    ///< allocations served by a freed range as is
  // --- per iteration, set by CloseIteration() at each boundary (slot 7) ---
  std::atomic<std::uint64_t> iterations{0};                     ///< boundaries closed
  std::atomic<std::uint64_t> last_iteration_vmm_calls{0};       ///< vmm_calls in the last one
  std::atomic<std::uint64_t> last_iteration_swap_out_bytes{0};  ///< swap_out_bytes in it
  std::atomic<std::uint64_t> last_iteration_swap_in_bytes{0};   ///< swap_in_bytes in it

  void Add(std::atomic<std::uint64_t>& c, std::uint64_t v = 1) {
    c.fetch_add(v, std::memory_order_relaxed);
  }
  /// One VMM driver call of `kind` (one of the vmm_* fields): counted there and in vmm_calls.
  void Vmm(std::atomic<std::uint64_t>& kind, std::uint64_t v = 1) {
    Add(vmm_calls, v);
    Add(kind, v);
  }
  static std::uint64_t Get(const std::atomic<std::uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  }

  /// An iteration boundary: the last_iteration_* fields become the deltas since the previous
  /// call. Called by one thread at a time (the runner's BeginIteration).
  void CloseIteration() {
    constexpr auto r = std::memory_order_relaxed;
    const std::uint64_t vmm = Get(vmm_calls), out = Get(swap_out_bytes), in = Get(swap_in_bytes);
    last_iteration_vmm_calls.store(vmm - mark_vmm_, r);
    last_iteration_swap_out_bytes.store(out - mark_out_, r);
    last_iteration_swap_in_bytes.store(in - mark_in_, r);
    mark_vmm_ = vmm;
    mark_out_ = out;
    mark_in_ = in;
    iterations.fetch_add(1, r);
  }

  /// Copies the published fields into the segment header, slots 5 and 7 (client side).
  void PublishTo(ipc::SegmentHeader* h) const {
    constexpr auto r = std::memory_order_relaxed;
    h->swap_out_bytes.store(Get(swap_out_bytes), r);
    h->swap_in_bytes.store(Get(swap_in_bytes), r);
    h->stall_count.store(Get(stall_count), r);
    h->stall_ns.store(Get(stall_ns), r);
    h->prefetch_hits.store(Get(prefetch_hits), r);
    h->host_pool_bytes.store(Get(host_pool_bytes), r);
    h->vmm_calls.store(Get(vmm_calls), r);
    h->policy_generation_applied.store(Get(policy_generation), r);
    h->prefetch_misses.store(Get(prefetch_misses), r);
    h->fault_ins.store(Get(fault_ins), r);
    h->evictions.store(Get(evictions), r);
    h->policy_ignored.store(Get(policy_ignored), r);
    h->executor_iterations.store(Get(iterations), r);
    h->last_iteration_vmm_calls.store(Get(last_iteration_vmm_calls), r);
    h->last_iteration_swap_out_bytes.store(Get(last_iteration_swap_out_bytes), r);
    h->last_iteration_swap_in_bytes.store(Get(last_iteration_swap_in_bytes), r);
  }

 private:
  // Counter values at the previous CloseIteration (only its caller touches them).
  std::uint64_t mark_vmm_ = 0, mark_out_ = 0, mark_in_ = 0;
};

}  // namespace chameleon::shim::swap
