// The daemon's Prometheus metrics. Every family is registered once, at construction; per-client
// series carry a `client` label whose value is the client's slot (reused when a client leaves),
// so the number of series is bounded by max_clients however many processes come and go.
// docs/metrics.md lists every metric. Thread-safe (prometheus-cpp metrics are atomic; the slot
// table is only touched from the loop thread).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chameleon/ipc/executor_counters.h"
#include "chameleon/ipc/segment_layout.h"

namespace chameleon::daemon {

/// Reasons counted in chameleon_daemon_bad_input_total{reason}.
enum class BadInput : std::uint8_t {
  kMalformedMessage,
  kOversizedMessage,
  kVersionMismatch,
  kBadSegment,
  kUnexpectedFd,
  kRingCorrupt,
  kBadRecord,
  kNamesCorrupt,
  kHeartbeatStale,
  kTooManyClients,
  kBadControl,
  kPermissionDenied,
  kCount,
};
const char* BadInputName(BadInput reason);

/// One executor counter's series: `counter` or `gauge` by the row's kind, both null for a row
/// without a metric.
struct ExecutorSeries {
  prometheus::Counter* counter = nullptr;
  prometheus::Gauge* gauge = nullptr;
};

/// The series of one client slot.
struct SlotMetrics {
  prometheus::Gauge* stage;
  prometheus::Gauge* pid;
  prometheus::Gauge* iteration_ops;
  prometheus::Gauge* iteration_seconds;
  prometheus::Counter* iterations;
  prometheus::Counter* shifts;
  prometheus::Counter* generations;
  /// STABLE reached under a device limit with no plan to apply: every candidate refused, none
  /// planned, or only an empty one after a refusal (a failure, not a success).
  prometheus::Counter* empty_stable;
  /// The chosen plan evicted in a steady iteration and was planned again with a larger reserve
  /// (ReserveFeedback).
  prometheus::Counter* reserve_raises;
  /// A sequence came back and the plan STABLE chose for it was in force again at once
  /// (PlanMemory).
  prometheus::Counter* plan_recalls;
  /// A sequence whose planning a shift cut short came back and its trials went on from what
  /// they had measured (PlanMemory).
  prometheus::Counter* planning_resumes;
  /// A remembered plan of another sequence was published ahead of it: the order of the
  /// iterations so far says that sequence runs next but one (SequencePredictor) ...
  prometheus::Counter* predicted_switches;
  /// ... and that iteration ran another one.
  prometheus::Counter* predicted_misses;
  /// The plan in force evicted under a repeated variant of its sequence (not a shift), which was
  /// then planned as a sequence of its own.
  prometheus::Counter* variant_plans;
  /// The reserve the last plan was generated with (device bytes it leaves free).
  prometheus::Gauge* reserve_bytes;
  prometheus::Counter* drained;
  prometheus::Counter* ops;
  prometheus::Counter* dropped;
  prometheus::Counter* repaired;
  prometheus::Counter* unknown;  ///< well-framed records of a type this daemon does not know
  prometheus::Gauge* bytes_live;
  prometheus::Gauge* bytes_peak;
  /// The executor's counters (SegmentHeader slots 5 and 7), indexed like ipc::kExecutorCounters.
  std::array<ExecutorSeries, ipc::kExecutorCounterCount> executor;
  prometheus::Gauge* device_limit_bytes;
};

/// Copies one client's executor counters from its segment header into its slot's series, as
/// deltas: a slot's counters keep growing across the clients that used it, and a value that goes
/// backwards (a misbehaving client) is ignored rather than trusted. One per client session; not
/// thread-safe (the loop thread's housekeeping timer calls it).
class ExecutorMetricsCopy {
 public:
  void Update(const ipc::SegmentHeader& header, SlotMetrics& slot);

 private:
  // The last value copied of each counter row, indexed like ipc::kExecutorCounters.
  std::array<std::uint64_t, ipc::kExecutorCounterCount> seen_{};
};

class Metrics {
 public:
  Metrics();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  /// The series of `slot`, created on first use and kept (bounded by the slot count).
  SlotMetrics& Slot(std::uint32_t slot);
  /// Sets the gauges of a slot whose client left to their idle values.
  void ClearSlot(std::uint32_t slot);

  prometheus::Gauge& clients() { return *clients_; }
  prometheus::Counter& connections() { return *connections_; }
  prometheus::Counter& disconnects() { return *disconnects_; }
  prometheus::Counter& bad_input(BadInput reason) { return *bad_input_[static_cast<int>(reason)]; }
  prometheus::Histogram& generation_seconds() { return *generation_seconds_; }
  prometheus::Histogram& detection_seconds() { return *detection_seconds_; }
  /// Sets chameleon_host_memory_bytes{numa="<i>"} to the node's host DRAM per NUMA node (from
  /// topology::ReadHostMemory at start-up). Nodes beyond a shorter, later list read 0.
  void SetHostMemory(const std::vector<std::uint64_t>& numa_bytes);

  /// Text exposition of every family (what /metrics serves).
  std::string Serialize() const;

 private:
  template <typename T>
  using Family = prometheus::Family<T>;

  // The executor's families and series (executor_metrics.cc).
  void RegisterExecutorFamilies();
  void AddExecutorSeries(std::uint32_t slot, SlotMetrics* m);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* clients_;
  prometheus::Counter* connections_;
  prometheus::Counter* disconnects_;
  std::vector<prometheus::Counter*> bad_input_;
  prometheus::Histogram* generation_seconds_;
  prometheus::Histogram* detection_seconds_;
  Family<prometheus::Gauge>* stage_;
  Family<prometheus::Gauge>* pid_;
  Family<prometheus::Gauge>* iteration_ops_;
  Family<prometheus::Gauge>* iteration_seconds_;
  Family<prometheus::Counter>* iterations_;
  Family<prometheus::Counter>* shifts_;
  Family<prometheus::Counter>* generations_;
  Family<prometheus::Counter>* empty_stable_;
  Family<prometheus::Counter>* reserve_raises_;
  Family<prometheus::Counter>* plan_recalls_;
  Family<prometheus::Counter>* planning_resumes_;
  Family<prometheus::Counter>* predicted_switches_;
  Family<prometheus::Counter>* predicted_misses_;
  Family<prometheus::Counter>* variant_plans_;
  Family<prometheus::Gauge>* reserve_bytes_;
  Family<prometheus::Counter>* drained_;
  Family<prometheus::Counter>* ops_;
  Family<prometheus::Counter>* dropped_;
  Family<prometheus::Counter>* repaired_;
  Family<prometheus::Counter>* unknown_;
  Family<prometheus::Gauge>* bytes_live_;
  Family<prometheus::Gauge>* bytes_peak_;
  // The executor's families by name (several rows may share one, told apart by `direction`).
  std::map<std::string, Family<prometheus::Counter>*> executor_counters_;
  std::map<std::string, Family<prometheus::Gauge>*> executor_gauges_;
  Family<prometheus::Gauge>* device_limit_bytes_;
  Family<prometheus::Gauge>* host_memory_bytes_;
  std::vector<prometheus::Gauge*> host_memory_series_;
  std::map<std::uint32_t, SlotMetrics> slots_;
};

}  // namespace chameleon::daemon
