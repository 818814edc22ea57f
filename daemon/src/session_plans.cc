// ClientSession: remembered plans (PlanMemory) and the variants of a sequence that get a plan of
// their own (docs/detection.md, "Remembered plans"). OnIteration (session_policy.cc) recalls a
// plan whenever an iteration runs another exact sequence than the one in force; RaiseReserve asks
// for PlanVariant when the plan in force evicts under a repeated variant.
#include <spdlog/spdlog.h>

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
  const PlanMemory::Plan* plan = plans_.Recall(sequence, DeviceLimit(), exclusions_.version());
  if (plan == nullptr) return false;
  stable_sequence_ = sequence;
  variant_repeated_ = false;
  IterationTracker& tracker = *loop_.tracker();
  const StageStep step = tracker.ResumeStable();
  const CandidateTrials::Candidate* chosen = plan->chosen ? &*plan->chosen : nullptr;
  spdlog::info(
      "client {} (pid {}): iteration {} repeats a sequence seen before ({} ops); the plan chosen "
      "for it ({} swaps) is in force again; stage {} -> {}",
      identity_.id, identity_.pid, tracker.iterations(), sequence.ops,
      chosen != nullptr ? chosen->policy.entries.size() : 0, StageName(step.before),
      StageName(step.after));
  slot_metrics_->plan_recalls->Increment();
  slot_metrics_->stage->Set(static_cast<double>(step.after));
  // A re-plan of it (ReserveFeedback) starts from the profile it was planned from.
  recorder_.Recall(plan->profile);
  trials_.Restart();       // the candidates tried were another sequence's
  feedback_.Replanning();  // a re-plan wanted for the plan before the shift is moot
  PublishChosen(chosen);   // as STABLE republishes the candidate it chose
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
