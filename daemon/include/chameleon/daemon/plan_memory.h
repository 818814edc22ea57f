// PlanMemory: the plans STABLE chose for the op sequences one client has run, so that a sequence
// coming back is planned at once instead of from WARMUP again.
//
// Why. A training loop changes its op sequence and then returns to it: an auxiliary branch on for
// a while, an evaluation pass every N steps, an optimizer step skipped after an fp16 overflow.
// Each return is a shift, and the stages start again: m + n + 3 iterations under no plan (the
// safety net alone) and under untried candidates before STABLE, every time. The sequence, its
// profile and the plan chosen for it have not changed, so the chosen plan can come back the
// moment an iteration of that sequence is seen again (ClientSession::RecallPlan).
//
// What makes a recall valid: the same exact op sequence (SequenceKey: the plan's anchors are
// (token, occurrence) pairs counted from the boundary, so they bind exactly as when it was
// chosen), the same boundary (the session clears the memory when it changes), the same device
// limit and the same pointer-exclusion version (a target reported since may be a tensor the plan
// swaps). Anything else is a miss, and the stages run as before.
//
// A sequence left before STABLE chose its plan keeps what planning learned so far (a plan in
// progress: its profile and the candidates measured, CandidateTrials::Progress), under the same
// sequence and limit (any exclusion version: see Resume); when it comes back, GEN_POLICY goes on
// from there (ClientSession::ResumePlanning) instead of starting again. Without that, a loop whose
// sequences alternate faster than m + n + 3 iterations never reaches STABLE in any of them.
//
// Bounded (least recently used goes first). Not thread-safe: only the loop thread touches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "chameleon/daemon/candidate_trials.h"
#include "chameleon/daemon/iteration_tracker.h"
#include "chameleon/policy/profile.h"

namespace chameleon::daemon {

class PlanMemory {
 public:
  struct Plan {
    SequenceKey sequence;
    /// The candidate STABLE chose (nullopt: STABLE without a plan, which is only remembered
    /// where there was nothing to plan for, i.e. no device limit).
    std::optional<CandidateTrials::Candidate> chosen;
    /// The profile it was planned from: a re-plan of a recalled plan (ReserveFeedback) needs it.
    std::shared_ptr<const policy::Profile> profile;
    std::uint64_t device_limit = 0;
    std::uint64_t exclusions = 0;  ///< PointerExclusions::version() when chosen
    /// Set: a plan in progress (no `chosen` yet), the trials to go on from.
    std::optional<CandidateTrials::Progress> progress;
  };

  /// `capacity` 0: nothing is remembered (DaemonOptions::remembered_plans).
  explicit PlanMemory(std::size_t capacity) : capacity_(capacity) {}

  /// Keeps `plan` (chosen, or in progress), replacing any of the same sequence; the least
  /// recently used goes when full.
  void Remember(Plan plan);
  /// The chosen plan remembered for `sequence` under the same limit and exclusion version, or
  /// nullptr. A hit counts as a use (it is kept longest) and as a recall.
  const Plan* Recall(const SequenceKey& sequence, std::uint64_t device_limit,
                     std::uint64_t exclusions);
  /// The plan Recall would give, without counting a use or a recall (a plan published ahead of
  /// its sequence, ClientSession::PredictSwitch: it is recalled when the sequence runs).
  const Plan* Peek(const SequenceKey& sequence, std::uint64_t device_limit,
                   std::uint64_t exclusions) const;
  /// The plan in progress remembered for `sequence` under the same limit, taken out of the
  /// memory (its trials are live again; Remember it when left again), or nullopt. A hit counts
  /// as a resume. Any exclusion version: the profile holds every tensor and the next candidates
  /// are planned under the exclusions then; those planned before compete only when no other
  /// does (CandidateTrials::Best).
  std::optional<Plan> Resume(const SequenceKey& sequence, std::uint64_t device_limit);
  /// A device-timed interval (CandidateTrials::Progress::Credit) for the plans in progress: the
  /// last iteration of a sequence a shift left is timed after the shift.
  void CreditProgress(std::uint64_t generation, std::uint64_t interval, double seconds);
  /// Forgets every plan (the boundary or the options changed); the recall count stays.
  void Clear() { plans_.clear(); }
  /// A new capacity (live options): the least recently used go if there are too many.
  void SetCapacity(std::size_t capacity);

  std::size_t size() const { return plans_.size(); }
  /// Of size(): plans in progress.
  std::size_t in_progress() const;
  std::size_t capacity() const { return capacity_; }
  std::uint64_t recalls() const { return recalls_; }
  std::uint64_t resumes() const { return resumes_; }

 private:
  void Trim();
  /// `exclusions` nullopt: any version.
  static bool Matches(const Plan& plan, const SequenceKey& sequence, std::uint64_t device_limit,
                      std::optional<std::uint64_t> exclusions, bool in_progress);
  std::vector<Plan>::iterator Find(const SequenceKey& sequence, std::uint64_t device_limit,
                                   std::optional<std::uint64_t> exclusions, bool in_progress);

  std::size_t capacity_;
  std::vector<Plan> plans_;  // least recently used first
  std::uint64_t recalls_ = 0;
  std::uint64_t resumes_ = 0;
};

}  // namespace chameleon::daemon
