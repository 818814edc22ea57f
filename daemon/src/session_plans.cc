// ClientSession: remembered plans (PlanMemory), plans in progress suspended by a shift and resumed
// when their sequence comes back, and the variants of a sequence that get a plan of their own
// (docs/detection.md, "Remembered plans"). OnIteration (session_policy.cc) recalls a plan, or
// resumes one in progress, whenever an iteration runs another exact sequence than the one in
// force; RaiseReserve asks for PlanVariant when the plan in force evicts under a repeated variant;
// PredictSwitch publishes a remembered plan ahead of its sequence where the loop runs a schedule
// (docs/detection.md, "Switching ahead of a schedule").
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <utility>

#include "chameleon/daemon/client_session.h"

namespace chameleon::daemon {

void ClientSession::RememberPlan(const CandidateTrials::Candidate* chosen) {
  const IterationTracker* tracker = loop_.tracker();
  if (tracker == nullptr || disabled_) return;
  const std::uint64_t limit = DeviceLimit();
  // No plan under a limit is a failure to plan (ReportEmptyStable): the next return of the
  // sequence tries again rather than recalling it.
  if (chosen == nullptr && limit != 0) return;
  PlanMemory::Plan plan;
  plan.sequence = stable_sequence_;
  if (chosen != nullptr) plan.chosen = *chosen;
  plan.profile = recorder_.fresh() ? recorder_.profile() : nullptr;
  plan.device_limit = limit;
  plan.exclusions = exclusions_.version();
  plans_.Remember(std::move(plan));
}

bool ClientSession::RecallPlan(const SequenceKey& sequence) {
  // A re-plan in flight is of the plan in force before the shift: it would land on this one.
  if (disabled_ || replan_in_flight_ || plans_.capacity() == 0) return false;
  const PlanMemory::Plan* hit = plans_.Recall(sequence, DeviceLimit(), exclusions_.version());
  if (hit == nullptr) return false;
  // A copy: suspending the planning it replaces (a variant's candidates under trial, no shift
  // between) remembers that, which may move the memory's entries.
  const PlanMemory::Plan recalled = *hit;
  const PlanMemory::Plan* plan = &recalled;
  if (stage() == Stage::kGenPolicy) SuspendPlanning(true);
  stable_sequence_ = sequence;
  variant_repeated_ = false;
  IterationTracker& tracker = *loop_.tracker();
  const StageStep step = tracker.ResumeStable();
  const CandidateTrials::Candidate* chosen = plan->chosen ? &*plan->chosen : nullptr;
  // Published ahead of this iteration (PredictSwitch) and still the latest: in force already.
  const bool ahead = predicted_.generation != 0 &&
                     predicted_.generation == publisher_.generation() &&
                     predicted_.sequence == sequence;
  spdlog::info(
      "client {} (pid {}): iteration {} repeats a sequence seen before ({} ops); the plan chosen "
      "for it ({} swaps) is in force again{}; stage {} -> {}",
      identity_.id, identity_.pid, tracker.iterations(), sequence.ops,
      chosen != nullptr ? chosen->policy.entries.size() : 0,
      ahead ? " (published ahead of it)" : "", StageName(step.before), StageName(step.after));
  slot_metrics_->plan_recalls->Increment();
  slot_metrics_->stage->Set(static_cast<double>(step.after));
  // A re-plan of it (ReserveFeedback) starts from the profile it was planned from.
  recorder_.Recall(plan->profile);
  profile_sequence_ = plan->profile ? sequence : SequenceKey{};
  trials_.Restart();       // the candidates tried were another sequence's
  feedback_.Replanning();  // a re-plan wanted for the plan before the shift is moot
  if (ahead) {
    KeepChosen(chosen, predicted_.generation);
  } else {
    PublishChosen(chosen);  // as STABLE republishes the candidate it chose
  }
  predicted_.generation = 0;  // the plan of the sequence in force from here
  return true;
}

void ClientSession::ScorePrediction(const IterationEvent& event) {
  if (predicted_.iteration == 0 || event.index < predicted_.iteration) return;
  // An iteration lost at a boundary (discarded) may skip the one predicted: not scored.
  if (event.index == predicted_.iteration && !(event.sequence == predicted_.sequence)) {
    ++predicted_misses_;
    slot_metrics_->predicted_misses->Increment();
  }
  predicted_.iteration = 0;
}

void ClientSession::PredictSwitch(const IterationEvent& event) {
  // GEN_POLICY: the mailbox carries the candidates on trial.
  if (!options_.predict_switches || disabled_ || replan_in_flight_ || plans_.capacity() == 0 ||
      stage() == Stage::kGenPolicy) {
    return;
  }
  // A plan published at this cut is installed at the boundary after the next one: the shim is
  // already in the iteration after the one just cut (kPredictAhead).
  const bool ahead_in_force =
      predicted_.generation != 0 && predicted_.generation == publisher_.generation();
  const std::optional<SequenceKey> next = predictor_.Next();
  if (stage() == Stage::kWarmup) {
    // A shift to a sequence with no plan (a skipped optimizer step) published none. Where the
    // schedule says a planned sequence runs next but one, its plan is better than none there.
    if (next && !(ahead_in_force && predicted_.sequence == *next)) PublishAhead(*next, event);
    return;
  }
  const SequenceKey& in_force = ahead_in_force ? predicted_.sequence : stable_sequence_;
  // No prediction: keep one published for an iteration still to come, else the sequence in force.
  const bool pending = ahead_in_force && predicted_.iteration > event.index;
  const SequenceKey wanted = next ? *next : pending ? predicted_.sequence : stable_sequence_;
  if (wanted == in_force) return;
  if (wanted == stable_sequence_) {
    // The switch published ahead did not come (or is no longer predicted): the plan in force
    // before it, again. A copy: KeepChosen replaces the chosen candidate it points to.
    const std::optional<CandidateTrials::Candidate> chosen =
        trials_.chosen() ? std::optional(*trials_.chosen()) : std::nullopt;
    PublishChosen(chosen ? &*chosen : nullptr);
    predicted_.generation = 0;
    return;
  }
  PublishAhead(wanted, event);
}

void ClientSession::PublishAhead(const SequenceKey& sequence, const IterationEvent& event) {
  const PlanMemory::Plan* plan = plans_.Peek(sequence, DeviceLimit(), exclusions_.version());
  if (plan == nullptr || !plan->chosen) return;  // not planned (yet): the recall, when it runs
  Publish(&plan->chosen->policy);
  predicted_ = {sequence, publisher_.generation(), event.index + kPredictAhead};
  ++predicted_switches_;
  slot_metrics_->predicted_switches->Increment();
  spdlog::debug(
      "client {} (pid {}): iteration {} is expected to run the sequence of {} ops; its plan "
      "({} swaps) published ahead as generation {}",
      identity_.id, identity_.pid, event.index + kPredictAhead, sequence.ops,
      plan->chosen->policy.entries.size(), publisher_.generation());
}

void ClientSession::NoteProfileSequence(const policy::Profile* before) {
  const std::shared_ptr<const policy::Profile>& profile = recorder_.profile();
  if (!profile || profile.get() == before) return;
  const IterationTracker* tracker = loop_.tracker();
  profile_sequence_ = tracker != nullptr ? tracker->last_sequence() : SequenceKey{};
  // The detailed iteration ends at a mark, right after the tracker cut it; a profile of another
  // length (an op of another thread ended it early) is of no sequence known.
  if (profile_sequence_.ops != profile->ops.size()) profile_sequence_ = SequenceKey{};
}

void ClientSession::SuspendPlanning(bool trials) {
  const std::shared_ptr<const policy::Profile>& profile = recorder_.profile();
  const SequenceKey sequence = profile_sequence_;
  const std::uint64_t limit = DeviceLimit();
  // A profile of a known sequence spares its return the detailed iteration; timed, it plans at
  // once. Nothing less is kept.
  if (plans_.capacity() == 0 || disabled_ || limit == 0 || !recorder_.fresh() || !profile ||
      sequence.ops == 0) {
    return;
  }
  PlanMemory::Plan plan;
  plan.sequence = sequence;
  plan.profile = profile;
  plan.device_limit = limit;
  plan.exclusions = exclusions_.version();
  // Candidates are planned only from a timed profile: an untimed one has none to keep.
  plan.progress = trials && recorder_.timed() ? trials_.Suspend() : CandidateTrials::Progress{};
  // Cut at the iteration that began at the last boundary, the first of another sequence.
  plan.progress->credit_before = clock_.last_boundary();
  spdlog::info(
      "client {} (pid {}): planning of a sequence of {} ops left before STABLE ({} candidate(s) "
      "measured); it goes on from there if the sequence comes back",
      identity_.id, identity_.pid, sequence.ops, plan.progress->candidates.size());
  plans_.Remember(std::move(plan));
}

bool ClientSession::ResumePlanning(const SequenceKey& sequence) {
  if (disabled_ || replan_in_flight_ || plans_.capacity() == 0) return false;
  if (stage() == Stage::kGenPolicy && sequence == profile_sequence_) return false;  // its own
  std::optional<PlanMemory::Plan> plan = plans_.Resume(sequence, DeviceLimit());
  if (!plan) return false;
  if (stage() == Stage::kGenPolicy) SuspendPlanning(true);
  profile_sequence_ = sequence;
  variant_repeated_ = false;
  const StageStep step = loop_.tracker()->ResumePlanning();
  spdlog::info(
      "client {} (pid {}): iteration {} repeats a sequence whose planning was cut short ({} ops, "
      "{} candidate(s) measured); its trials go on; stage {} -> {}",
      identity_.id, identity_.pid, loop_.tracker()->iterations(), sequence.ops,
      plan->progress->candidates.size(), StageName(step.before), StageName(step.after));
  slot_metrics_->planning_resumes->Increment();
  slot_metrics_->stage->Set(static_cast<double>(step.after));
  // Its intervals after the one just cut, which ran under another plan.
  recorder_.Resume(plan->profile, clock_.last_boundary());
  trials_.Resume(std::move(*plan->progress));
  feedback_.Watch(0);  // no chosen plan in force
  feedback_.Replanning();
  Publish(nullptr);  // the plan in force was another sequence's; its next candidate follows
  // An untimed profile is timed under that empty policy, not under the plan before it.
  recorder_.SetTimingFloor(publisher_.generation());
  return true;
}

void ClientSession::PlanVariant() {
  variant_repeated_ = false;
  spdlog::info(
      "client {} (pid {}): the plan chosen for a sequence of {} ops evicted while a variant of it "
      "({} ops, similar enough not to be a shift) ran twice in a row; planning the variant as a "
      "sequence of its own",
      identity_.id, identity_.pid, stable_sequence_.ops, last_sequence_.ops);
  slot_metrics_->variant_plans->Increment();
  ++variant_plans_;
  // Its intervals from the next boundary on; the profile of the sequence planned for is not its.
  recorder_.NewSequence(clock_.last_boundary() + 1);
  const StageStep step = loop_.tracker()->ReplanVariant();
  if (step.changed()) OnStageChange(step);
}

}  // namespace chameleon::daemon
