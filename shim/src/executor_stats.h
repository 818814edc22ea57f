// The executor's counters as text for people and tests, both generated from the rows of
// chameleon/ipc/executor_counters.inc: the CHAMELEON_DEBUG=stats exit line ("name=value") and the
// CHAMELEON_STATS_FILE records (one JSON object per line; docs/shim.md, "Stats file").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "swap/counters.h"

namespace chameleon::shim {

/// " name=value" for every counter, in the table's order (the stats line after its "limit=").
std::string FormatCounterPairs(const swap::CounterValues& values);

/// CHAMELEON_STATS_FILE: appends one JSON object per line, for each iteration the executor closes
/// and once at exit, with that iteration's counters (counters: the delta since the previous
/// record; gauges: their level), the cumulative values and the policy generation in force.
///
/// Off the hot path: the thread that closes an iteration (the application thread whose op is the
/// boundary, inside ExecutorBoundary under the runner's mutex) and the unload hook at exit write
/// it. Each record is formatted into a fixed buffer on the stack and written with one write(2)
/// to an O_APPEND descriptor: no allocation, no stdio buffer that a fork could duplicate, and
/// whole lines even when several processes share the file (each record names its pid).
///
/// Not thread-safe: callers serialise (the executor's runner mutex).
class StatsFile {
 public:
  StatsFile() = default;
  ~StatsFile();
  StatsFile(const StatsFile&) = delete;
  StatsFile& operator=(const StatsFile&) = delete;

  /// Opens `path` for appending (created 0644). False, with nothing written later, on failure.
  bool Open(const char* path);
  bool is_open() const { return fd_ >= 0; }

  /// One record. `event`: "iteration" or "exit"; `generation`: the policy generation in force
  /// during the span it covers; `limit`: the device limit in force.
  void Write(const char* event, const swap::CounterValues& now, std::uint64_t generation,
             std::uint64_t limit);

 private:
  int fd_ = -1;
  swap::CounterValues previous_{};  // totals at the previous record (counters' deltas)
};

}  // namespace chameleon::shim
