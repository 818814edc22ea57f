// The swap executor's metric families (docs/metrics.md, "Swap executor") and the copy of a
// client's executor counters from its segment header into them. Both loop over the rows of
// chameleon/ipc/executor_counters.inc: a counter's metric name and help are spelled only there.
#include <string>

#include "chameleon/daemon/metrics.h"

namespace chameleon::daemon {
namespace {

using ipc::CounterKind;
using ipc::kExecutorCounters;
using prometheus::BuildCounter;
using prometheus::BuildGauge;

/// Adds the delta since the last copy; a value that went backwards is ignored (not trusted).
void AddDelta(std::uint64_t now, std::uint64_t* seen, prometheus::Counter* counter, double scale) {
  if (now <= *seen) return;
  counter->Increment(double(now - *seen) * scale);
  *seen = now;
}

bool HasMetric(const ipc::ExecutorCounter& row) { return row.published() && row.metric[0] != '\0'; }

}  // namespace

void Metrics::RegisterExecutorFamilies() {
  auto& r = *registry_;
  // Rows sharing a family register it once; its help is the first row's.
  for (const ipc::ExecutorCounter& row : kExecutorCounters) {
    if (!HasMetric(row)) continue;
    if (row.kind == CounterKind::kCounter && !executor_counters_.count(row.metric)) {
      executor_counters_[row.metric] = &BuildCounter().Name(row.metric).Help(row.help).Register(r);
    } else if (row.kind == CounterKind::kGauge && !executor_gauges_.count(row.metric)) {
      executor_gauges_[row.metric] = &BuildGauge().Name(row.metric).Help(row.help).Register(r);
    }
  }
  device_limit_bytes_ = &BuildGauge()
                             .Name("chameleon_device_limit_bytes")
                             .Help("Device memory limit in force in the client (0: none)")
                             .Register(r);
}

void Metrics::AddExecutorSeries(std::uint32_t slot, SlotMetrics* m) {
  const std::string client = std::to_string(slot);
  for (std::size_t i = 0; i < ipc::kExecutorCounterCount; ++i) {
    const ipc::ExecutorCounter& row = kExecutorCounters[i];
    if (!HasMetric(row)) continue;
    prometheus::Labels labels{{"client", client}};
    if (row.direction[0] != '\0') labels.emplace("direction", row.direction);
    if (row.kind == CounterKind::kCounter) {
      m->executor[i].counter = &executor_counters_.at(row.metric)->Add(labels);
    } else {
      m->executor[i].gauge = &executor_gauges_.at(row.metric)->Add(labels);
    }
  }
  m->device_limit_bytes = &device_limit_bytes_->Add({{"client", client}});
}

void ExecutorMetricsCopy::Update(const ipc::SegmentHeader& h, SlotMetrics& m) {
  for (std::size_t i = 0; i < ipc::kExecutorCounterCount; ++i) {
    const ipc::ExecutorCounter& row = kExecutorCounters[i];
    const ExecutorSeries& series = m.executor[i];
    if (series.counter != nullptr) AddDelta(row.Load(h), &seen_[i], series.counter, row.scale);
    if (series.gauge != nullptr) series.gauge->Set(double(row.Load(h)) * row.scale);
  }
  m.device_limit_bytes->Set(double(h.device_limit_bytes.load(std::memory_order_relaxed)));
}

}  // namespace chameleon::daemon
