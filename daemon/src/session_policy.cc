// ClientSession: iterations and stages, the stage hold, candidate policies, publishing and the
// metric copies: where the session's parts meet.
//
// Every candidate configuration is measured before STABLE (docs/detection.md §4): the next
// candidate is generated as soon as the previous one has one credited interval, and while
// candidates are still being tried the stage machine holds GEN_POLICY past stage_n (bounded, so
// a client whose marks stop coming still reaches STABLE).
#include <spdlog/spdlog.h>

#include "chameleon/daemon/client_session.h"

namespace chameleon::daemon {
namespace {

/// The shim executor's default chunk (CHAMELEON_SWAP_CHUNK_BYTES): 2 MiB, the VMM granularity.
constexpr std::uint64_t kShimChunkBytes = 2ull << 20;

}  // namespace

void ClientSession::OnIteration(const IterationEvent& event) {
  if (event.discarded) return;
  slot_metrics_->iteration_ops->Set(double(event.ops));
  if (event.step.shift) {
    spdlog::info(
        "client {} (pid {}): sequence shift at iteration {} (similarity {:.3f}, length "
        "{} -> {} ops)",
        identity_.id, identity_.pid, event.index, event.comparison.similarity,
        event.comparison.previous_ops, event.comparison.ops);
  }
  if (event.step.changed()) OnStageChange(event.step);
  if (stage() == Stage::kGenPolicy) trials_.StepPassed();
}

void ClientSession::OnStageChange(const StageStep& step) {
  spdlog::info("client {} (pid {}): stage {} -> {}", identity_.id, identity_.pid,
               StageName(step.before), StageName(step.after));
  slot_metrics_->stage->Set(static_cast<double>(step.after));
  if (step.after == Stage::kGenPolicy) {
    // A new stable sequence: profile it afresh and try every candidate configuration again.
    trials_.Restart();
    recorder_.Restart();
    Publish(nullptr);
    // The profile's iteration time must come from iterations run without the old policy.
    recorder_.SetTimingFloor(publisher_.generation());
  } else if (step.after == Stage::kStable) {
    // The best measured device time wins.
    const CandidateTrials::Candidate* best = trials_.Best();
    Publish(best != nullptr ? &best->policy : nullptr);
    // Iterations under the republished policy keep measuring the chosen one.
    trials_.Choose(best, best != nullptr ? publisher_.generation() : 0);
  } else {
    Publish(nullptr);  // WARMUP: the old triggers no longer match the sequence
  }
}

bool ClientSession::CandidatesPending() const {
  // Only with layout-1.1 marks (each candidate measured on its own intervals): a client without
  // them keeps the paper's n.
  if (stage() != Stage::kGenPolicy || !clock_.carries_generation() || disabled_) return false;
  // The profile the candidates need is on its way (a late boundary detection can leave fewer
  // than n steps for it): the detailed iteration, then its device time.
  if (recorder_.in_progress()) return true;
  if (!recorder_.fresh()) return false;  // the detailed iteration was given up
  if (!recorder_.timed()) return true;
  return trials_.Pending(DeviceLimit() != 0);
}

void ClientSession::UpdateStageHold(std::uint64_t now_ns) {
  // A hold that sees no progress for a while (marks stopped coming, the shim never applies the
  // candidate) lets go: the client still reaches STABLE, with what was measured.
  if (stage() != Stage::kGenPolicy && !hold_.held()) return;  // per op: keep the others cheap
  // O(1): the profile, then candidates taken, published and measured one after the other.
  const bool hold = hold_.Update(recorder_.progress() + trials_.progress(), loop_.iterations(),
                                 now_ns, CandidatesPending());
  loop_.tracker()->SetGenPolicyHold(hold, StageHold::MaxSteps(trials_.configs()));
}

std::uint64_t ClientSession::DeviceLimit() const {
  // Read at each generation, so a reloaded `devices` limit is used by the next candidate.
  const std::uint64_t client =
      segment_.header()->device_limit_bytes.load(std::memory_order_acquire);
  const auto& devices = identity_.hello.devices;
  if (devices.empty()) return EffectiveDeviceLimit(0, client, 0);
  return EffectiveDeviceLimit(ConfiguredDeviceLimit(options_, devices.front().ordinal), client,
                              devices.front().total_memory);
}

bool ClientSession::WantsGeneration() const {
  return stage() == Stage::kGenPolicy && recorder_.fresh() && recorder_.profile() &&
         recorder_.timed() && trials_.WantsNext(clock_.carries_generation()) &&
         DeviceLimit() != 0 && !disabled_;
}

std::pair<std::shared_ptr<const policy::Profile>, policy::GeneratorOptions>
ClientSession::TakeGeneration(std::uint32_t* index) {
  policy::GeneratorOptions options = trials_.Take(index);
  options.device_limit_bytes = DeviceLimit();
  // The shim's executor (docs/executor.md) serves swappable allocations in whole chunks and
  // frees / takes their memory when a transfer is issued: plan with the same accounting, or
  // the plan's last bytes of headroom turn into OOM evictions there. The shim does not report
  // its chunk size yet; its default is the VMM granularity.
  if (options.chunk_bytes == 0) options.chunk_bytes = kShimChunkBytes;
  options.release_at_issue = true;
  // Pointer-table targets unswappable.
  return {exclusions_.ProfileFor(recorder_.profile()), options};
}

void ClientSession::InstallCandidate(CandidateResult result) {
  trials_.Finished(result.ok ? std::string() : result.message);
  if (!result.ok) {
    spdlog::warn("client {} (pid {}): candidate {} not generated: {}", identity_.id, identity_.pid,
                 result.index, result.message);
    return;
  }
  if (stage() != Stage::kGenPolicy) return;  // a shift overtook it
  // Deduplication would look the policy up among trials_.candidates() here, before publishing.
  Publish(&result.policy);
  const ipc::PolicySummary& summary = result.policy.summary;
  spdlog::info(
      "client {} (pid {}): candidate {} published as generation {} ({} swaps, predicted "
      "{:.6f} s, {:.3f} ms to generate)",
      identity_.id, identity_.pid, result.index, publisher_.generation(),
      result.policy.entries.size(), summary.predicted_iteration_s, result.seconds * 1e3);
  trials_.Add(publisher_.generation(), std::move(result.policy));
}

void ClientSession::Publish(const ipc::Policy* base) {
  const IterationTracker* tracker = loop_.tracker();
  publisher_.Publish(base, stage(), tracker ? tracker->iteration_ops() : 0,
                     tracker ? tracker->signature() : std::vector<std::uint32_t>{});
}

void ClientSession::CopyCounters() {
  const ipc::SegmentHeader* h = segment_.header();
  auto delta = [](std::uint64_t now, std::uint64_t* copied, prometheus::Counter* counter,
                  double scale) {
    // A client's counters only grow; one that goes back is ignored rather than trusted.
    if (now > *copied) counter->Increment(double(now - *copied) * scale);
    if (now > *copied) *copied = now;
  };
  SlotMetrics& m = *slot_metrics_;
  delta(drained_, &copied_.drained, m.drained, 1);
  delta(ops_, &copied_.ops, m.ops, 1);
  delta(h->records_dropped.load(std::memory_order_relaxed), &copied_.dropped, m.dropped, 1);
  delta(ring_.repaired(), &copied_.repaired, m.repaired, 1);
  delta(loop_.iterations(), &copied_.iterations, m.iterations, 1);
  delta(loop_.shifts(), &copied_.shifts, m.shifts, 1);
  delta(publisher_.published(), &copied_.generations, m.generations, 1);
  executor_copy_.Update(*h, m);  // the swap executor's counters (executor_metrics.cc)
  m.bytes_live->Set(double(h->device_bytes_live.load(std::memory_order_relaxed)));
  m.bytes_peak->Set(double(h->device_bytes_peak.load(std::memory_order_relaxed)));
  m.stage->Set(static_cast<double>(stage()));
}

}  // namespace chameleon::daemon
