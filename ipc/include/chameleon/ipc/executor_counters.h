// The executor's counters as data: one descriptor per row of executor_counters.inc, for readers
// that loop over them (the daemon's metrics and client description, chameleonctl, tests) instead
// of naming each. The shim's SwapCounters is generated from the same rows (shim/src/swap/).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chameleon/ipc/segment_layout.h"

namespace chameleon::ipc {

/// Counter: monotonic (a per-iteration value is a delta); gauge: a level (reported as is).
enum class CounterKind : std::uint8_t { kCounter, kGauge };

/// One row of executor_counters.inc (the column comments there say what each field means).
struct ExecutorCounter {
  const char* stat;  ///< name in the CHAMELEON_DEBUG=stats line and the stats file
  CounterKind kind;
  /// The SegmentHeader field it is published in; null for a shim-only counter.
  std::atomic<std::uint64_t> SegmentHeader::*segment;
  const char* metric;     ///< Prometheus family, "" = none
  const char* direction;  ///< value of the `direction` label, "" = none
  double scale;           ///< counter unit -> metric and JSON unit
  const char* json;       ///< key in the client description's "swap" object, "" = none
  const char* view;       ///< chameleonctl row label, "" = none
  const char* help;

  bool published() const { return segment != nullptr; }
  /// The value `header` holds (relaxed: each field is an independent count).
  std::uint64_t Load(const SegmentHeader& header) const {
    return (header.*segment).load(std::memory_order_relaxed);
  }
};

/// Every row, in the table's order.
inline constexpr ExecutorCounter kExecutorCounters[] = {
#define CHAMELEON_COUNTER_SLOT5(field, stat, kind, segment, metric, direction, scale, json, view, \
                                help)                                                             \
  {#stat, CounterKind::k##kind, &SegmentHeader::segment, metric, direction, scale, json, view,    \
   help},
#define CHAMELEON_COUNTER_SLOT7(field, stat, kind, segment, metric, direction, scale, json, view, \
                                help)                                                             \
  {#stat, CounterKind::k##kind, &SegmentHeader::segment, metric, direction, scale, json, view,    \
   help},
#define CHAMELEON_COUNTER_SHIM(field, stat, kind, segment, metric, direction, scale, json, view, \
                               help)                                                             \
  {#stat, CounterKind::k##kind, nullptr, metric, direction, scale, json, view, help},
#include "chameleon/ipc/executor_counters.inc"
};

inline constexpr std::size_t kExecutorCounterCount =
    sizeof(kExecutorCounters) / sizeof(kExecutorCounters[0]);

/// The row whose JSON key is `json`, or kExecutorCounterCount.
constexpr std::size_t ExecutorCounterIndexByJson(std::string_view json) {
  for (std::size_t i = 0; i < kExecutorCounterCount; ++i) {
    if (json == kExecutorCounters[i].json) return i;
  }
  return kExecutorCounterCount;
}

/// The row whose stat is `stat`, or kExecutorCounterCount.
constexpr std::size_t ExecutorCounterIndex(std::string_view stat) {
  for (std::size_t i = 0; i < kExecutorCounterCount; ++i) {
    if (stat == kExecutorCounters[i].stat) return i;
  }
  return kExecutorCounterCount;
}

}  // namespace chameleon::ipc
