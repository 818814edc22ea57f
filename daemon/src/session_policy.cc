// ClientSession: iterations and stages, the detailed iteration, candidate policies, publishing
// and the metric copies.
#include <spdlog/spdlog.h>

#include "chameleon/daemon/client_session.h"
#include "chameleon/ipc/policy_blob.h"

namespace chameleon::daemon {
namespace {

/// Detailed iterations requested in a row before giving up (each one lost records).
constexpr std::uint32_t kMaxDetailAttempts = 5;
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
  if (stage() == Stage::kGenPolicy) candidate_step_pending_ = true;
}

void ClientSession::OnStageChange(const StageStep& step) {
  spdlog::info("client {} (pid {}): stage {} -> {}", identity_.id, identity_.pid,
               StageName(step.before), StageName(step.after));
  slot_metrics_->stage->Set(static_cast<double>(step.after));
  if (step.after == Stage::kGenPolicy) {
    // A new stable sequence: profile it afresh and try every candidate configuration again.
    candidates_.clear();
    next_candidate_ = 0;
    candidate_step_pending_ = true;
    profile_fresh_ = false;
    profile_timed_ = false;
    detail_attempts_ = 0;
    RequestDetail();
    Publish(nullptr);
    // The profile's iteration time must come from iterations run without the old policy.
    profile_generation_ = generation_;
  } else if (step.after == Stage::kStable) {
    // The best measured device time wins (session_candidates.cc).
    const Candidate* best = BestCandidate();
    if (best != nullptr) chosen_ = *best;
    Publish(best != nullptr ? &best->policy : nullptr);
    // Iterations under the republished policy keep measuring the chosen one.
    chosen_generation_ = best != nullptr ? generation_ : 0;
  } else {
    Publish(nullptr);  // WARMUP: the old triggers no longer match the sequence
  }
}

void ClientSession::RequestDetail() {
  if (detail_attempts_ >= kMaxDetailAttempts) {
    spdlog::warn("client {} (pid {}): {} detailed iterations lost records; no profile this time",
                 identity_.id, identity_.pid, detail_attempts_);
    detail_ = DetailState::kIdle;
    return;
  }
  ++detail_attempts_;
  ipc::SegmentHeader* header = segment_.header();
  detail_dropped_at_request_ = header->records_dropped.load(std::memory_order_acquire);
  builder_.Begin(&live_);
  detail_ = DetailState::kRequested;
  header->detail_request_seq.fetch_add(1, std::memory_order_acq_rel);
  header->control_flags.fetch_or(ipc::kControlDetailedIteration, std::memory_order_acq_rel);
}

void ClientSession::FinishDetail(bool with_mark) {
  // Without its closing mark (another thread's op came first), the detailed iteration began at
  // the last boundary seen.
  if (!with_mark) detail_boundary_ = last_mark_iteration_;
  ipc::SegmentHeader* header = segment_.header();
  const std::uint64_t dropped = header->records_dropped.load(std::memory_order_acquire);
  if (dropped != detail_dropped_at_request_) {
    spdlog::info(
        "client {} (pid {}): {} records dropped during the detailed iteration; asking "
        "again",
        identity_.id, identity_.pid, dropped - detail_dropped_at_request_);
    RequestDetail();
    return;
  }
  header->control_flags.fetch_and(~std::uint32_t{ipc::kControlDetailedIteration},
                                  std::memory_order_acq_rel);
  auto profile = std::make_shared<policy::Profile>(
      // No iteration time yet: it is the device time of a later iteration (TimeProfile).
      builder_.Finish(names_, 0.0,
                      "chameleond client " + std::to_string(identity_.id) + " pid " +
                          std::to_string(identity_.pid)));
  spdlog::info(
      "client {} (pid {}): detailed iteration recorded: {} ops, {} tensors (boundary {}); "
      "waiting for the device time of a later iteration",
      identity_.id, identity_.pid, profile->ops.size(), profile->tensors.size(), detail_boundary_);
  profile_ = std::move(profile);
  profile_fresh_ = true;
  profile_timed_ = false;
  profile_clock_.clear();
  marks_since_detail_ = 0;
  profile_samples_ = 0;
  profile_best_s_ = 0;
  detail_ = DetailState::kDone;
}

void ClientSession::TimeProfile(double seconds, const char* clock) {
  auto timed = std::make_shared<policy::Profile>(*profile_);
  timed->iteration_s = seconds;
  profile_ = std::move(timed);
  profile_timed_ = true;
  profile_clock_ = clock;
  spdlog::info("client {} (pid {}): profile iteration time {:.6f} s ({} time)", identity_.id,
               identity_.pid, seconds, clock);
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
  return stage() == Stage::kGenPolicy && profile_fresh_ && profile_ && ReadyForCandidate() &&
         !generation_in_flight_ && candidate_step_pending_ && next_candidate_ < configs_.size() &&
         DeviceLimit() != 0 && !disabled_;
}

std::pair<std::shared_ptr<const policy::Profile>, policy::GeneratorOptions>
ClientSession::TakeGeneration(std::uint32_t* index) {
  generation_in_flight_ = true;
  candidate_step_pending_ = false;
  *index = next_candidate_++;
  policy::GeneratorOptions options = configs_[*index];
  options.device_limit_bytes = DeviceLimit();
  // The shim's executor (docs/executor.md) serves swappable allocations in whole chunks and
  // frees / takes their memory when a transfer is issued: plan with the same accounting, or
  // the plan's last bytes of headroom turn into OOM evictions there. The shim does not report
  // its chunk size yet; its default is the VMM granularity.
  if (options.chunk_bytes == 0) options.chunk_bytes = kShimChunkBytes;
  options.release_at_issue = true;
  return {ProfileForGeneration(), options};  // pointer-table targets unswappable
}

void ClientSession::InstallCandidate(CandidateResult result) {
  generation_in_flight_ = false;
  if (!result.ok) {
    generation_error_ = result.message;
    spdlog::warn("client {} (pid {}): candidate {} not generated: {}", identity_.id, identity_.pid,
                 result.index, result.message);
    return;
  }
  generation_error_.clear();
  if (stage() != Stage::kGenPolicy) return;  // a shift overtook it
  Publish(&result.policy);
  candidates_.push_back(Candidate{generation_, std::move(result.policy), 0, 0});
  spdlog::info(
      "client {} (pid {}): candidate {} published as generation {} ({} swaps, predicted "
      "{:.6f} s, {:.3f} ms to generate)",
      identity_.id, identity_.pid, result.index, generation_,
      candidates_.back().policy.entries.size(),
      candidates_.back().policy.summary.predicted_iteration_s, result.seconds * 1e3);
}

void ClientSession::Publish(const ipc::Policy* base) {
  ipc::Policy policy = base != nullptr ? *base : ipc::Policy{};
  policy.summary.generation = mailbox_.generation() + 1;
  policy.summary.stage = static_cast<std::uint32_t>(stage());
  policy.summary.iteration_ops = iteration_ops();
  policy.boundary = tracker_ ? tracker_->signature() : std::vector<std::uint32_t>{};
  std::vector<std::uint8_t> blob;
  ipc::EncodePolicy(policy, &blob);
  std::uint64_t generation = 0;
  if (mailbox_.Publish(blob, &generation) != ipc::PublishResult::kOk) {
    ++publish_refused_;
    spdlog::warn("client {} (pid {}): policy of {} bytes does not fit the mailbox slot",
                 identity_.id, identity_.pid, blob.size());
    return;
  }
  generation_ = generation;
  ++published_;
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
  delta(iterations(), &copied_.iterations, m.iterations, 1);
  delta(shifts(), &copied_.shifts, m.shifts, 1);
  delta(published_, &copied_.generations, m.generations, 1);
  executor_copy_.Update(*h, m);  // the swap executor's counters (executor_metrics.cc)
  m.bytes_live->Set(double(h->device_bytes_live.load(std::memory_order_relaxed)));
  m.bytes_peak->Set(double(h->device_bytes_peak.load(std::memory_order_relaxed)));
  m.stage->Set(static_cast<double>(stage()));
}

}  // namespace chameleon::daemon
