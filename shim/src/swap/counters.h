// The executor's counters. Written by the executor (relaxed atomics: each is an independent
// monotonic count or gauge), read by the shim's publisher, its stats line and stats file, and by
// tests from any thread. The fields are the rows of chameleon/ipc/executor_counters.inc (their
// help text is there), so a counter is named in exactly one place.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "chameleon/ipc/executor_counters.h"
#include "chameleon/ipc/segment_layout.h"

namespace chameleon::shim::swap {

/// Every counter's value at one moment, in the table's order (ipc::kExecutorCounters[i]).
using CounterValues = std::array<std::uint64_t, ipc::kExecutorCounterCount>;

/// Thread-safe: every field is an atomic updated with relaxed ordering.
struct SwapCounters {
#define CHAMELEON_COUNTER(field, ...) std::atomic<std::uint64_t> field{0};
#include "chameleon/ipc/executor_counters.inc"

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

  /// Every counter's current value (each read relaxed: not one atomic snapshot, which no
  /// reader needs: each value is monotonic or a level on its own).
  CounterValues Values() const {
    CounterValues v{};
    std::size_t i = 0;
#define CHAMELEON_COUNTER(field, ...) v[i++] = Get(field);
#include "chameleon/ipc/executor_counters.inc"
    return v;
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

  /// Copies the published fields into the segment header, slots 5 and 7, and the node-placement
  /// gauges of slot 6 (client side).
  void PublishTo(ipc::SegmentHeader* h) const {
    constexpr auto r = std::memory_order_relaxed;
#define CHAMELEON_COUNTER_SLOT5(field, stat, kind, segment, ...) h->segment.store(Get(field), r);
#define CHAMELEON_COUNTER_SLOT7(field, stat, kind, segment, ...) h->segment.store(Get(field), r);
#define CHAMELEON_COUNTER_SHIM(...)
#include "chameleon/ipc/executor_counters.inc"
    // Slot 6's node-placement fields (layout 1.3) are written by hand: the table's groups are
    // slots 5 and 7 only. The generation last, with release: a daemon that reads it as its proof
    // of a completed revocation then also sees peer_held_bytes as low as it was then.
    h->peer_held_bytes.store(Get(peer_held_bytes), r);
    h->reclaim_request_bytes.store(Get(reclaim_request_bytes), r);
    h->leases_applied_generation.store(Get(leases_applied_generation), std::memory_order_release);
  }

 private:
  // Counter values at the previous CloseIteration (only its caller touches them).
  std::uint64_t mark_vmm_ = 0, mark_out_ = 0, mark_in_ = 0;
};

}  // namespace chameleon::shim::swap
