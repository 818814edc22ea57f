#include "chameleon/daemon/metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace chameleon::daemon {

const char* BadInputName(BadInput reason) {
  switch (reason) {
    case BadInput::kMalformedMessage:
      return "malformed_message";
    case BadInput::kOversizedMessage:
      return "oversized_message";
    case BadInput::kVersionMismatch:
      return "version_mismatch";
    case BadInput::kBadSegment:
      return "bad_segment";
    case BadInput::kUnexpectedFd:
      return "unexpected_fd";
    case BadInput::kRingCorrupt:
      return "ring_corrupt";
    case BadInput::kBadRecord:
      return "bad_record";
    case BadInput::kNamesCorrupt:
      return "names_corrupt";
    case BadInput::kHeartbeatStale:
      return "heartbeat_stale";
    case BadInput::kTooManyClients:
      return "too_many_clients";
    case BadInput::kBadControl:
      return "bad_control";
    case BadInput::kPermissionDenied:
      return "permission_denied";
    case BadInput::kCount:
      break;
  }
  return "unknown";
}

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Policy generation and boundary detection take from tens of microseconds to seconds.
prometheus::Histogram::BucketBoundaries SecondsBuckets() {
  return {1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10};
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  clients_ = &BuildGauge()
                  .Name("chameleon_clients")
                  .Help("Connected client processes")
                  .Register(r)
                  .Add({});
  connections_ = &BuildCounter()
                      .Name("chameleon_client_connections_total")
                      .Help("Clients accepted (HELLO validated)")
                      .Register(r)
                      .Add({});
  disconnects_ = &BuildCounter()
                      .Name("chameleon_client_disconnects_total")
                      .Help("Clients released (socket closed, exited, stale or misbehaving)")
                      .Register(r)
                      .Add({});
  auto& bad = BuildCounter()
                  .Name("chameleon_daemon_bad_input_total")
                  .Help("Invalid input from peers, by reason; the daemon kept serving")
                  .Register(r);
  for (int i = 0; i < static_cast<int>(BadInput::kCount); ++i) {
    bad_input_.push_back(&bad.Add({{"reason", BadInputName(static_cast<BadInput>(i))}}));
  }
  generation_seconds_ = &BuildHistogram()
                             .Name("chameleon_policy_generation_seconds")
                             .Help("Time to generate one candidate policy (worker thread)")
                             .Register(r)
                             .Add({}, SecondsBuckets());
  detection_seconds_ = &BuildHistogram()
                            .Name("chameleon_detection_seconds")
                            .Help("Time to detect an iteration boundary (worker thread)")
                            .Register(r)
                            .Add({}, SecondsBuckets());
  stage_ = &BuildGauge()
                .Name("chameleon_client_stage")
                .Help("Stage: 0 WARMUP, 1 GEN_POLICY, 2 STABLE, -1 no client in the slot")
                .Register(r);
  pid_ = &BuildGauge()
              .Name("chameleon_client_pid")
              .Help("Process id of the client in the slot (0: none)")
              .Register(r);
  iteration_ops_ =
      &BuildGauge().Name("chameleon_iteration_ops").Help("Ops in the last iteration").Register(r);
  iteration_seconds_ = &BuildGauge()
                            .Name("chameleon_iteration_seconds")
                            .Help("Device time of the last iteration")
                            .Register(r);
  iterations_ = &BuildCounter()
                     .Name("chameleon_iterations_total")
                     .Help("Iterations cut by the daemon")
                     .Register(r);
  shifts_ = &BuildCounter()
                 .Name("chameleon_sequence_shifts_total")
                 .Help("Sequence shifts detected")
                 .Register(r);
  generations_ = &BuildCounter()
                      .Name("chameleon_policy_generations_total")
                      .Help("Policies published to the client")
                      .Register(r);
  empty_stable_ = &BuildCounter()
                       .Name("chameleon_policy_empty_stable_total")
                       .Help("STABLE reached under a device limit with an empty or refused plan")
                       .Register(r);
  reserve_raises_ = &BuildCounter()
                         .Name("chameleon_policy_reserve_raises_total")
                         .Help(
                             "Chosen plans that evicted in a steady iteration and were planned "
                             "again with a larger reserve")
                         .Register(r);
  plan_recalls_ = &BuildCounter()
                       .Name("chameleon_policy_recalls_total")
                       .Help(
                           "Sequences that came back after a shift and had the plan STABLE chose "
                           "for them in force again at once")
                       .Register(r);
  planning_resumes_ = &BuildCounter()
                           .Name("chameleon_policy_planning_resumes_total")
                           .Help(
                               "Sequences whose planning a shift cut short that came back, their "
                               "candidate trials going on from what they had measured")
                           .Register(r);
  predicted_switches_ = &BuildCounter()
                             .Name("chameleon_policy_predicted_switches_total")
                             .Help(
                                 "Plans of another op sequence published ahead of it, because "
                                 "the order of the iterations so far says it runs next but one")
                             .Register(r);
  predicted_misses_ = &BuildCounter()
                           .Name("chameleon_policy_predicted_switches_missed_total")
                           .Help(
                               "Of the predicted switches: the iteration they were published "
                               "for ran another sequence")
                           .Register(r);
  variant_plans_ = &BuildCounter()
                        .Name("chameleon_policy_variant_plans_total")
                        .Help(
                            "Plans that evicted under a repeated variant of their op sequence (not "
                            "a shift), which was then planned as a sequence of its own")
                        .Register(r);
  reserve_bytes_ = &BuildGauge()
                        .Name("chameleon_policy_reserve_bytes")
                        .Help("Device bytes the client's last plan leaves free (its reserve)")
                        .Register(r);
  drained_ = &BuildCounter()
                  .Name("chameleon_records_drained_total")
                  .Help("Ring records read by the daemon")
                  .Register(r);
  ops_ = &BuildCounter()
              .Name("chameleon_ops_total")
              .Help("Ops (launches, copies, memsets) read from the ring")
              .Register(r);
  dropped_ = &BuildCounter()
                  .Name("chameleon_records_dropped_total")
                  .Help("Records the client dropped (ring full)")
                  .Register(r);
  repaired_ = &BuildCounter()
                   .Name("chameleon_records_repaired_total")
                   .Help("Records left half-written by a dead writer, skipped")
                   .Register(r);
  unknown_ = &BuildCounter()
                  .Name("chameleon_records_unknown_total")
                  .Help("Records of a type this daemon does not know (a newer shim's), skipped")
                  .Register(r);
  bytes_live_ = &BuildGauge()
                     .Name("chameleon_device_bytes_live")
                     .Help("Device bytes in use by the client")
                     .Register(r);
  bytes_peak_ = &BuildGauge()
                     .Name("chameleon_device_bytes_peak")
                     .Help("Peak device bytes of the client")
                     .Register(r);
  host_memory_bytes_ = &BuildGauge()
                            .Name("chameleon_host_memory_bytes")
                            .Help(
                                "Host DRAM of the node per NUMA node (CHAMELEON_TOPOLOGY, "
                                "else sysfs, else physical RAM)")
                            .Register(r);
  RegisterExecutorFamilies();
}

void Metrics::SetHostMemory(const std::vector<std::uint64_t>& numa_bytes) {
  // Called at start-up only; series are added once per NUMA node and kept.
  while (host_memory_series_.size() < numa_bytes.size()) {
    const std::string numa = std::to_string(host_memory_series_.size());
    host_memory_series_.push_back(&host_memory_bytes_->Add({{"numa", numa}}));
  }
  for (std::size_t i = 0; i < host_memory_series_.size(); ++i)
    host_memory_series_[i]->Set(i < numa_bytes.size() ? static_cast<double>(numa_bytes[i]) : 0);
}

SlotMetrics& Metrics::Slot(std::uint32_t slot) {
  auto it = slots_.find(slot);
  if (it != slots_.end()) return it->second;
  const prometheus::Labels labels{{"client", std::to_string(slot)}};
  SlotMetrics m{};
  m.stage = &stage_->Add(labels);
  m.pid = &pid_->Add(labels);
  m.iteration_ops = &iteration_ops_->Add(labels);
  m.iteration_seconds = &iteration_seconds_->Add(labels);
  m.iterations = &iterations_->Add(labels);
  m.shifts = &shifts_->Add(labels);
  m.generations = &generations_->Add(labels);
  m.empty_stable = &empty_stable_->Add(labels);
  m.reserve_raises = &reserve_raises_->Add(labels);
  m.plan_recalls = &plan_recalls_->Add(labels);
  m.planning_resumes = &planning_resumes_->Add(labels);
  m.predicted_switches = &predicted_switches_->Add(labels);
  m.predicted_misses = &predicted_misses_->Add(labels);
  m.variant_plans = &variant_plans_->Add(labels);
  m.reserve_bytes = &reserve_bytes_->Add(labels);
  m.drained = &drained_->Add(labels);
  m.dropped = &dropped_->Add(labels);
  m.ops = &ops_->Add(labels);
  m.repaired = &repaired_->Add(labels);
  m.unknown = &unknown_->Add(labels);
  m.bytes_live = &bytes_live_->Add(labels);
  m.bytes_peak = &bytes_peak_->Add(labels);
  AddExecutorSeries(slot, &m);
  return slots_.emplace(slot, m).first->second;
}

void Metrics::ClearSlot(std::uint32_t slot) {
  SlotMetrics& m = Slot(slot);
  m.stage->Set(-1);
  m.pid->Set(0);
  m.iteration_ops->Set(0);
  m.iteration_seconds->Set(0);
  m.bytes_live->Set(0);
  m.bytes_peak->Set(0);
  m.reserve_bytes->Set(0);
  for (const ExecutorSeries& e : m.executor) {
    if (e.gauge != nullptr) e.gauge->Set(0);
  }
  m.device_limit_bytes->Set(0);
}

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace chameleon::daemon
