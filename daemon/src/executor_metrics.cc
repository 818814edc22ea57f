// The swap executor's metric families (docs/metrics.md, "Swap executor") and the copy of a
// client's executor counters from its segment header into them.
#include <string>

#include "chameleon/daemon/metrics.h"

namespace chameleon::daemon {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

/// Adds the delta since the last copy; a value that went backwards is ignored (not trusted).
void AddDelta(std::uint64_t now, std::uint64_t* seen, prometheus::Counter* counter,
              double scale = 1) {
  if (now <= *seen) return;
  counter->Increment(double(now - *seen) * scale);
  *seen = now;
}

std::uint64_t Load(const std::atomic<std::uint64_t>& field) {
  return field.load(std::memory_order_relaxed);
}

}  // namespace

void Metrics::RegisterExecutorFamilies() {
  auto& r = *registry_;
  stalls_ = &BuildCounter()
                 .Name("chameleon_swap_stalls_total")
                 .Help("Host waits by the executor (fault-ins and unmaps that waited for a copy)")
                 .Register(r);
  prefetch_misses_ = &BuildCounter()
                          .Name("chameleon_prefetch_misses_total")
                          .Help("Swap-ins not complete when their consumer arrived")
                          .Register(r);
  vmm_calls_ = &BuildCounter()
                    .Name("chameleon_vmm_calls_total")
                    .Help("Driver VMM calls by the executor (reserve, create, map, unmap, ...)")
                    .Register(r);
  vmm_calls_last_iteration_ = &BuildGauge()
                                   .Name("chameleon_vmm_calls_last_iteration")
                                   .Help("Driver VMM calls in the client's last iteration")
                                   .Register(r);
  swap_bytes_last_iteration_ = &BuildGauge()
                                    .Name("chameleon_swap_last_iteration_bytes")
                                    .Help("Bytes swapped in the client's last iteration")
                                    .Register(r);
  fault_ins_ = &BuildCounter()
                    .Name("chameleon_swap_fault_ins_total")
                    .Help("Swapped-out ranges touched by an op and brought back synchronously")
                    .Register(r);
  evictions_ = &BuildCounter()
                    .Name("chameleon_swap_evictions_total")
                    .Help("Tensors evicted to serve an allocation at the device limit")
                    .Register(r);
  policy_ignored_ = &BuildCounter()
                         .Name("chameleon_policy_entries_ignored_total")
                         .Help("Policy entries that matched no live tensor (ignored)")
                         .Register(r);
  policy_generation_applied_ = &BuildGauge()
                                    .Name("chameleon_policy_generation_applied")
                                    .Help("Policy generation the client's executor has in force")
                                    .Register(r);
  device_limit_bytes_ = &BuildGauge()
                             .Name("chameleon_device_limit_bytes")
                             .Help("Device memory limit in force in the client (0: none)")
                             .Register(r);
}

void Metrics::AddExecutorSeries(std::uint32_t slot, SlotMetrics* m) {
  const std::string client = std::to_string(slot);
  const prometheus::Labels labels{{"client", client}};
  m->stalls = &stalls_->Add(labels);
  m->prefetch_misses = &prefetch_misses_->Add(labels);
  m->vmm_calls = &vmm_calls_->Add(labels);
  m->vmm_calls_last_iteration = &vmm_calls_last_iteration_->Add(labels);
  m->swap_out_last_iteration =
      &swap_bytes_last_iteration_->Add({{"client", client}, {"direction", "out"}});
  m->swap_in_last_iteration =
      &swap_bytes_last_iteration_->Add({{"client", client}, {"direction", "in"}});
  m->fault_ins = &fault_ins_->Add(labels);
  m->evictions = &evictions_->Add(labels);
  m->policy_ignored = &policy_ignored_->Add(labels);
  m->policy_generation_applied = &policy_generation_applied_->Add(labels);
  m->device_limit_bytes = &device_limit_bytes_->Add(labels);
}

void ExecutorMetricsCopy::Update(const ipc::SegmentHeader& h, SlotMetrics& m) {
  AddDelta(Load(h.swap_out_bytes), &seen_.swap_out, m.swap_out);
  AddDelta(Load(h.swap_in_bytes), &seen_.swap_in, m.swap_in);
  AddDelta(Load(h.stall_count), &seen_.stall_count, m.stalls);
  AddDelta(Load(h.stall_ns), &seen_.stall_ns, m.stall_seconds, 1e-9);
  AddDelta(Load(h.prefetch_hits), &seen_.prefetch_hits, m.prefetch_hits);
  AddDelta(Load(h.prefetch_misses), &seen_.prefetch_misses, m.prefetch_misses);
  AddDelta(Load(h.vmm_calls), &seen_.vmm_calls, m.vmm_calls);
  AddDelta(Load(h.fault_ins), &seen_.fault_ins, m.fault_ins);
  AddDelta(Load(h.evictions), &seen_.evictions, m.evictions);
  AddDelta(Load(h.policy_ignored), &seen_.policy_ignored, m.policy_ignored);
  m.host_pool_bytes->Set(double(Load(h.host_pool_bytes)));
  m.vmm_calls_last_iteration->Set(double(Load(h.last_iteration_vmm_calls)));
  m.swap_out_last_iteration->Set(double(Load(h.last_iteration_swap_out_bytes)));
  m.swap_in_last_iteration->Set(double(Load(h.last_iteration_swap_in_bytes)));
  m.policy_generation_applied->Set(double(Load(h.policy_generation_applied)));
  m.device_limit_bytes->Set(double(Load(h.device_limit_bytes)));
}

}  // namespace chameleon::daemon
