// ClientSession: iterations and stages, the stage hold, candidate policies, publishing and the
// metric copies: where the session's parts meet.
//
// Every candidate configuration is measured before STABLE (docs/detection.md §4): the next
// candidate is generated as soon as the previous one has one credited interval, and while
// candidates are still being tried the stage machine holds GEN_POLICY past stage_n (bounded, so
// a client whose marks stop coming still reaches STABLE).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "chameleon/daemon/client_session.h"
#include "chameleon/daemon/swap_chunk.h"

namespace chameleon::daemon {

void ClientSession::OnIteration(const IterationEvent& event) {
  if (event.discarded) return;
  predictor_.Observe(event.sequence);
  ScorePrediction(event);
  slot_metrics_->iteration_ops->Set(double(event.ops));
  if (event.step.shift) {
    spdlog::info(
        "client {} (pid {}): sequence shift at iteration {} (similarity {:.3f}, length "
        "{} -> {} ops)",
        identity_.id, identity_.pid, event.index, event.comparison.similarity,
        event.comparison.previous_ops, event.comparison.ops);
  }
  if (event.comparison.has_previous && !event.comparison.stable) {
    // What planning learned of the sequence left waits for its return (PlanMemory).
    if (event.step.before != Stage::kStable)
      SuspendPlanning(event.step.before == Stage::kGenPolicy);
    // Its mark comes right after this op: the new sequence's intervals begin at the next one.
    // A detailed iteration requested for the old sequence is called off.
    recorder_.NewSequence(clock_.last_boundary() + 1);
  }
  // Another exact sequence than the one the plan in force was chosen for: after a shift, or a
  // variant similar enough not to be one (docs/detection.md, "Remembered plans").
  const bool other = stage() != Stage::kStable || !(event.sequence == stable_sequence_);
  variant_repeated_ = stage() == Stage::kStable && other && event.comparison.stable &&
                      event.sequence == last_sequence_;
  variant_first_ = stage() == Stage::kStable && other && last_sequence_ == stable_sequence_;
  last_sequence_ = event.sequence;
  // A sequence STABLE already chose a plan for: that plan again, now, instead of the stages; one
  // whose planning a shift cut short: its trials go on.
  if (other && event.comparison.has_previous &&
      (RecallPlan(event.sequence) || ResumePlanning(event.sequence))) {
    PredictSwitch(event);
    return;
  }
  if (event.step.changed()) OnStageChange(event.step);
  if (stage() == Stage::kGenPolicy) trials_.StepPassed();
  if (stage() == Stage::kWarmup && event.comparison.stable) ProfileDuringWarmup();
  PredictSwitch(event);
}

void ClientSession::ProfileDuringWarmup() {
  // The sequence repeated once: record its detailed iteration now rather than on entering
  // GEN_POLICY, so that the profile (and its time, from the WARMUP intervals) is ready when
  // GEN_POLICY begins and its n + 1 steps go to candidates (docs/detection.md §4). An unstable
  // step before GEN_POLICY drops it (NewSequence).
  if (recorder_.in_progress() || recorder_.fresh() || disabled_) return;
  recorder_.Restart();
  recorder_.SetTimingFloor(no_swaps_since_);
}

void ClientSession::OnStageChange(const StageStep& step) {
  spdlog::info("client {} (pid {}): stage {} -> {}", identity_.id, identity_.pid,
               StageName(step.before), StageName(step.after));
  slot_metrics_->stage->Set(static_cast<double>(step.after));
  if (step.after != Stage::kStable) {
    feedback_.Watch(0);  // no chosen plan in force any more; a wanted re-plan is moot
    feedback_.Replanning();
  }
  if (step.after == Stage::kGenPolicy) {
    // A new stable sequence: try every candidate configuration again, from the profile recorded
    // during WARMUP (ProfileDuringWarmup), or one recorded now when WARMUP had none.
    trials_.Restart();
    const bool profiled = recorder_.in_progress() || recorder_.fresh();
    if (!profiled) recorder_.Restart();
    Publish(nullptr);
    // The profile's iteration time must come from iterations run without the old policy: any
    // since the last policy with swaps was replaced (WARMUP's included).
    if (!profiled) recorder_.SetTimingFloor(no_swaps_since_);
  } else if (step.after == Stage::kStable) {
    // The best measured device time wins, among the candidates planned with every pointer
    // target reported so far (a target reported since pins a tensor an older one may swap).
    const std::uint64_t exclusions = exclusions_.version();
    if (const std::size_t stale = trials_.Stale(exclusions); stale != 0) {
      spdlog::info(
          "client {} (pid {}): {} candidate(s) planned before the last pointer-table report; "
          "{}",
          identity_.id, identity_.pid, stale,
          stale < trials_.candidates().size() ? "only the later ones compete"
                                              : "none later, so they compete");
    }
    const CandidateTrials::Candidate* best = trials_.Best(exclusions);
    ReportEmptyStable(best);
    PublishChosen(best);
    // Remembered under the sequence its profile recorded (its anchors bind exactly there), or,
    // not known, the one just run.
    stable_sequence_ = profile_sequence_.ops != 0 ? profile_sequence_
                       : loop_.tracker()          ? loop_.tracker()->last_sequence()
                                                  : SequenceKey{};
    RememberPlan(best);
  } else {
    Publish(nullptr);  // WARMUP: the old triggers no longer match the sequence
  }
}

void ClientSession::PublishChosen(const CandidateTrials::Candidate* chosen) {
  Publish(chosen != nullptr ? &chosen->policy : nullptr);
  KeepChosen(chosen, publisher_.generation());
}

void ClientSession::KeepChosen(const CandidateTrials::Candidate* chosen, std::uint64_t generation) {
  // Iterations under the published policy keep measuring the chosen one ...
  trials_.Choose(chosen, chosen != nullptr ? generation : 0);
  // ... and tell whether its reserve is enough (a plan with no swaps needs none).
  const bool swaps = chosen != nullptr && !chosen->policy.entries.empty();
  feedback_.Watch(swaps ? generation : 0);
}

void ClientSession::ReportEmptyStable(const CandidateTrials::Candidate* best) {
  if (DeviceLimit() == 0 || disabled_) return;  // nothing to plan for
  // An empty plan is right when the profile fits (no refusal); after a refusal, or with no plan
  // at all, the client runs on the safety net alone.
  const bool refused = !trials_.error().empty();
  if (best != nullptr && (!best->policy.entries.empty() || !refused)) return;
  slot_metrics_->empty_stable->Increment();
  spdlog::warn(
      "client {} (pid {}): STABLE without a plan ({}): {}; the safety net does all the "
      "swapping",
      identity_.id, identity_.pid,
      best == nullptr ? "no candidate published" : "only an empty candidate",
      refused ? trials_.error()
              : (recorder_.fresh() ? "no candidate was generated" : "no fresh profile"));
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
  IterationTracker& tracker = *loop_.tracker();
  tracker.SetGenPolicyHold(hold, StageHold::MaxSteps(trials_.configs()));
  // Let go past stage_n (the last candidate just measured): STABLE now, not a step later.
  if (!hold) {
    const StageStep step = tracker.ReleaseHold();
    if (step.changed()) OnStageChange(step);
  }
}

CandidateTrials::Marks ClientSession::MarkKind() const {
  if (clock_.marks_installed()) return CandidateTrials::Marks::kInstalled;
  return clock_.carries_generation() ? CandidateTrials::Marks::kGeneration
                                     : CandidateTrials::Marks::kNone;
}

std::uint64_t ClientSession::OwnLimit() const {
  // Read at each generation, so a reloaded `devices` limit is used by the next candidate. The
  // shim's own limit, not the one in force: that one is already lowered by what this daemon lent
  // of the GPU, and lending or planning from it would lower it again at every republish. A
  // layout-1.3 shim reports only the one in force.
  const ipc::SegmentHeader* h = segment_.header();
  const std::uint64_t own = h->own_limit_bytes.load(std::memory_order_acquire);
  const std::uint64_t client =
      own != 0 ? own : h->device_limit_bytes.load(std::memory_order_acquire);
  const auto& devices = identity_.hello.devices;
  if (devices.empty()) return EffectiveDeviceLimit(0, client, 0);
  // The device the executor serves (a torchrun rank that sees every GPU serves its own rank's,
  // not the first); the first HELLO device until the executor is decided.
  const ipc::DeviceFacts* device = &devices.front();
  const int executor = ExecutorOrdinal();
  for (const ipc::DeviceFacts& d : devices) {
    if (executor >= 0 && d.ordinal == executor) device = &d;
  }
  return EffectiveDeviceLimit(ConfiguredDeviceLimit(options_, device->ordinal), client,
                              device->total_memory);
}

int ClientSession::ExecutorOrdinal() const {
  const std::uint64_t executor = segment_.header()->executor_device.load(std::memory_order_acquire);
  return executor >= 1 && executor <= 0x10000 ? static_cast<int>(executor - 1) : -1;
}

std::uint64_t ClientSession::DeviceLimit() const {
  // What the node lent of this GPU to other clients is not this client's to plan for. The book
  // lends at most OwnLimit() − peak − reserve, so the difference stays positive.
  const std::uint64_t limit = OwnLimit();
  const std::uint64_t lent = node_ != nullptr ? node_->LentBy(identity_.id) : 0;
  return limit - std::min(limit, lent);
}

NodeClient ClientSession::NodeView() const {
  const ipc::SegmentHeader* h = segment_.header();
  NodeClient view;
  view.id = identity_.id;
  view.uid = static_cast<std::uint32_t>(identity_.uid);
  view.devices = identity_.hello.devices;
  view.limit_bytes = OwnLimit();
  view.peak_bytes = h->device_bytes_peak.load(std::memory_order_relaxed);
  // Untrusted: a wrong figure only misleads the lending of this client's own other devices to
  // itself (UpdateSelfLenders); an ordinal no HELLO device has is never looked up.
  view.executor_ordinal = ExecutorOrdinal();
  view.device_peaks.resize(ipc::kSegmentDevicePeaks);
  for (std::size_t d = 0; d < ipc::kSegmentDevicePeaks; ++d) {
    view.device_peaks[d] = h->device_peak_bytes[d].load(std::memory_order_relaxed);
  }
  view.reclaim_request_bytes = h->reclaim_request_bytes.load(std::memory_order_acquire);
  view.leases_applied_generation = h->leases_applied_generation.load(std::memory_order_acquire);
  if (base_ && !disabled_) {
    // What its copies take where they go: whole chunks (a lease of fewer bytes holds less).
    for (const ipc::SwapEntry& e : base_->entries) view.demand_bytes += SwapSpan(e.bytes);
    view.iteration_s = base_->summary.predicted_iteration_s;
    // The plan's predicted stall is the part of its transfers compute did not hide.
    view.window_s = std::max(0.0, view.iteration_s - base_->summary.predicted_stall_s);
  }
  return view;
}

void ClientSession::Republish() {
  const std::uint64_t from = publisher_.generation();
  std::optional<ipc::Policy> base = base_;
  Publish(base ? &*base : nullptr);
  // The same plan under a new generation: its measurements carry over (CandidateTrials), and
  // ReserveFeedback watches it from its first interval under the new one.
  if (base && publisher_.generation() != from) {
    trials_.Republished(from, publisher_.generation());
    if (feedback_.watched() == from) feedback_.Watch(publisher_.generation());
    if (predicted_.generation == from) predicted_.generation = publisher_.generation();
  }
}

bool ClientSession::ProfileFitsIteration() const {
  // A second line of defence behind ForgetProfile: a profile far from the iteration's length is
  // of another iteration (a detailed iteration cut at a boundary since replaced). Within 2x: a
  // dynamic loop's modes and the detailed iteration's own cut differ by less.
  const IterationTracker* tracker = loop_.tracker();
  const auto& profile = recorder_.profile();
  if (tracker == nullptr || !profile) return false;
  const std::uint64_t ops = tracker->iteration_ops(), recorded = profile->ops.size();
  return ops == 0 || (2 * recorded >= ops && recorded <= 2 * ops);
}

bool ClientSession::WantsGeneration() const {
  if (replan_in_flight_ || !recorder_.fresh() || !recorder_.profile() || DeviceLimit() == 0 ||
      disabled_ || !ProfileFitsIteration()) {
    return false;
  }
  if (stage() == Stage::kStable) return WantsReplan();
  return stage() == Stage::kGenPolicy && recorder_.timed() && trials_.WantsNext(MarkKind());
}

std::uint64_t ClientSession::ReserveFor(policy::GeneratorOptions config,
                                        std::uint32_t level) const {
  // The limit and chunk size a plan of `config` is generated with (TakeGeneration).
  config.device_limit_bytes = DeviceLimit();
  if (config.chunk_bytes == 0) config.chunk_bytes = kShimChunkBytes;
  std::uint64_t base = config.reserve_bytes;
  if (base == 0) base = DefaultReserveBytes(config.device_limit_bytes, config.chunk_bytes);
  // Raised while chosen plans evicted in steady iterations (ReserveFeedback): kept for the
  // client's later plans too.
  return ReserveFeedback::ReserveAt(level, base, config.device_limit_bytes, config.chunk_bytes);
}

void ClientSession::RaiseReserve() {
  const CandidateTrials::Candidate* chosen = trials_.chosen();
  if (stage() != Stage::kStable || chosen == nullptr || DeviceLimit() == 0) return;
  // Short under a variant of its sequence: the variant needs a plan of its own, not a plan of
  // the other sequence with room for the difference (which it would then keep). Only with plans
  // remembered: otherwise each return to either would be planned again from scratch.
  if (variant_repeated_ && plans_.capacity() != 0) {
    PlanVariant();
    return;
  }
  // The first iteration of a variant right after the plan's own sequence: its evictions are not
  // the reserve's to mend. Run again, the variant is planned (above); a loop whose iterations all
  // differ a little raises the reserve at the next one, whose predecessor is no longer the plan's.
  if (variant_first_ && plans_.capacity() != 0) return;
  const policy::GeneratorOptions config = trials_.config(chosen->config);
  const std::uint64_t now = ReserveFor(config, feedback_.level());
  const std::uint64_t next = ReserveFor(config, feedback_.level() + 1);
  if (next <= now) {
    spdlog::warn(
        "client {} (pid {}): the chosen plan (generation {}) evicted in a steady iteration with "
        "a reserve of {} bytes, the most this limit allows; the safety net covers the rest",
        identity_.id, identity_.pid, feedback_.watched(), now);
    feedback_.Watch(0);  // said once
    return;
  }
  spdlog::info(
      "client {} (pid {}): the chosen plan (generation {}) evicted in a steady iteration; "
      "planning it again with a reserve of {} bytes (was {})",
      identity_.id, identity_.pid, feedback_.watched(), next, now);
  feedback_.Raise();
  slot_metrics_->reserve_raises->Increment();
}

bool ClientSession::WantsReplan() const {
  return feedback_.replan_wanted() && trials_.chosen() != nullptr;
}

policy::GeneratorOptions ClientSession::WithHostLink(policy::GeneratorOptions options) const {
  // The client's own link, per direction, where the node knows it: a measured or declared figure
  // beats the configured one-size default (25e9 against 46.8e9 / 54.8e9 on an H100 host link).
  // A per-direction figure the operator configured stands above both.
  if (host_link_) {
    if (options.device_to_host_bytes_per_s == 0)
      options.device_to_host_bytes_per_s = host_link_->device_to_host;
    if (options.host_to_device_bytes_per_s == 0)
      options.host_to_device_bytes_per_s = host_link_->host_to_device;
  }
  return options;
}

std::pair<std::shared_ptr<const policy::Profile>, policy::GeneratorOptions>
ClientSession::TakeGeneration(CandidateResult* result) {
  std::uint32_t* index = &result->index;
  result->round = trials_.round();
  policy::GeneratorOptions options;
  if (stage() == Stage::kStable && WantsReplan()) {
    // The chosen plan evicted in a steady iteration: its own configuration again, with the
    // reserve ReserveFeedback raised (InstallCandidate publishes it in its place).
    *index = trials_.chosen()->config;
    options = trials_.config(*index);
    feedback_.Replanning();
    replan_in_flight_ = true;
  } else {
    // Planned from the profile ProfileFor() marks below, under the exclusions known now.
    options = trials_.Take(index, exclusions_.version());
  }
  options.device_limit_bytes = DeviceLimit();
  // The shim's executor (docs/executor.md) serves swappable allocations in whole chunks and
  // frees / takes their memory when a transfer is issued: plan with the same accounting, or
  // the plan's last bytes of headroom turn into OOM evictions there. The shim does not report
  // its chunk size yet; its default is the VMM granularity.
  if (options.chunk_bytes == 0) options.chunk_bytes = kShimChunkBytes;
  // A plan that fills the limit to the byte overflows it by what the profile does not show (the
  // executor's high-water mark at a quarter of the small trainer's peak: 0.1 MB over the limit,
  // and 62 evictions and fault-ins every steady step; GPT-2 XL at a half and three quarters of
  // its peak: one 41 MB eviction and fault-in every steady step with two chunks kept, none with
  // four). Two chunks are kept free, four from a 1 GiB limit on, unless the configuration names
  // its own reserve, and more once a chosen plan evicted (docs/policy.md, "Reserve").
  options.reserve_bytes = ReserveFor(options, feedback_.level());
  last_reserve_bytes_ = options.reserve_bytes;
  slot_metrics_->reserve_bytes->Set(double(options.reserve_bytes));
  options.release_at_issue = true;
  options = WithHostLink(options);
  // Only the executor's device's tensors count against its limit; pointer-table targets are
  // unswappable.
  const std::uint64_t executor_device =
      segment_.header()->executor_device.load(std::memory_order_acquire);
  return {exclusions_.ProfileFor(device_view_.ProfileFor(recorder_.profile(), executor_device)),
          options};
}

void ClientSession::InstallCandidate(CandidateResult result) {
  if (replan_in_flight_) {
    InstallReplan(std::move(result));
    return;
  }
  if (result.round != trials_.round()) {
    // Planned for trials left since (a shift, a recall, a resumed sequence): never theirs.
    trials_.Dropped();
    return;
  }
  trials_.Finished(result.ok ? std::string() : result.message);
  if (!result.ok) {
    spdlog::warn("client {} (pid {}): candidate {} not generated: {}", identity_.id, identity_.pid,
                 result.index, result.message);
    return;
  }
  if (stage() != Stage::kGenPolicy) return;  // a shift overtook it
  const CandidateTrials::Candidate* same =
      options_.deduplicate_candidates ? trials_.Find(result.policy) : nullptr;
  if (same != nullptr) {
    // The shim would run it exactly like the earlier one: its measurement stands for both.
    spdlog::info(
        "client {} (pid {}): candidate {} plans the same {} swaps as generation {}; not "
        "published",
        identity_.id, identity_.pid, result.index, result.policy.entries.size(), same->generation);
    trials_.AddDuplicate(same->generation);
    return;
  }
  spdlog::info(
      "client {} (pid {}): candidate {} generated ({} swaps, predicted {:.6f} s, {:.3f} ms to "
      "generate)",
      identity_.id, identity_.pid, result.index, result.policy.entries.size(),
      result.policy.summary.predicted_iteration_s, result.seconds * 1e3);
  if (!trials_.MayPublish(MarkKind())) {
    // Planned ahead: published once the shim installed the candidate on trial (HandleMark).
    trials_.Hold(std::move(result.policy));
    return;
  }
  PublishCandidate(std::move(result.policy));
}

void ClientSession::InstallReplan(CandidateResult result) {
  replan_in_flight_ = false;
  if (!result.ok) {
    // The chosen plan stays in force (the safety net covers what it is short of).
    spdlog::warn("client {} (pid {}): re-plan with a larger reserve not generated: {}",
                 identity_.id, identity_.pid, result.message);
    return;
  }
  if (stage() != Stage::kStable || trials_.chosen() == nullptr) return;  // a shift overtook it
  Publish(&result.policy);
  spdlog::info(
      "client {} (pid {}): re-planned with a larger reserve ({} swaps, predicted {:.6f} s), "
      "published as generation {}",
      identity_.id, identity_.pid, result.policy.entries.size(),
      result.policy.summary.predicted_iteration_s, publisher_.generation());
  trials_.Rechoose(publisher_.generation(), std::move(result.policy));
  feedback_.Watch(publisher_.generation());
  RememberPlan(trials_.chosen());  // its sequence's plan from now on
}

void ClientSession::PublishCandidate(ipc::Policy policy) {
  Publish(&policy);
  spdlog::info("client {} (pid {}): candidate published as generation {}", identity_.id,
               identity_.pid, publisher_.generation());
  trials_.Add(publisher_.generation(), std::move(policy));
}

void ClientSession::PublishReadyCandidate() {
  if (stage() != Stage::kGenPolicy || !trials_.MayPublish(MarkKind())) return;
  if (std::optional<ipc::Policy> ready = trials_.TakeReady()) PublishCandidate(std::move(*ready));
}

void ClientSession::Publish(const ipc::Policy* base) {
  const IterationTracker* tracker = loop_.tracker();
  if (base != nullptr) {
    base_ = *base;
  } else {
    base_.reset();
  }
  ipc::Policy policy = base != nullptr ? *base : ipc::Policy{};
  // Every policy names the limit to run under, also one without swaps: the shim keeps the last
  // limit it was given, so a limit lowered by a lease comes back only by a policy that says so.
  if (const std::uint64_t limit = DeviceLimit(); limit != 0) {
    policy.summary.device_limit_bytes = limit;
  }
  if (node_ != nullptr)
    node_->Decorate(identity_.id, identity_.hello.devices, DeviceLimit(), &policy);
  publisher_.Publish(&policy, stage(), tracker ? tracker->iteration_ops() : 0,
                     tracker ? tracker->signature() : std::vector<std::uint32_t>{});
  if (node_ != nullptr) node_->Published(identity_.id, publisher_.generation());
  const bool swaps = base != nullptr && !base->entries.empty();
  if (swaps) {
    swaps_published_ = true;
  } else if (swaps_published_) {
    swaps_published_ = false;
    no_swaps_since_ = publisher_.generation();
  }
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
