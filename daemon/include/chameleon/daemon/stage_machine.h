// The per-client stage machine of the paper's Algorithm 1.
//
// A sequence shift is any unstable step once the loop has been stable at least once: the op
// sequence differs from the previous iteration's (the trainer's "shift at step N" has the same
// meaning, so a branch switched on and off again is two shifts).
// Any unstable step returns to WARMUP and resets the counter. In WARMUP, more than m consecutive
// stable steps move to GEN_POLICY (counter reset: GEN_POLICY generates one candidate per step);
// in GEN_POLICY, more than n further stable steps move to STABLE. With the paper's m = 2 and
// n = 5 a steady loop is STABLE at its (m + n + 3)-th iteration (the first has nothing to be
// compared with).
// A hold (the session's: candidates still being measured) keeps GEN_POLICY past n stable steps,
// up to n + max_extra; releasing it after more than n stable steps moves to STABLE at once
// (Release), not at the next stable step: the last candidate's measurement usually arrives just
// after a step, and waiting for the next would cost a whole iteration.
#pragma once

#include <cstdint>

#include "chameleon/ipc/policy_blob.h"

namespace chameleon::daemon {

using Stage = ipc::Stage;

/// "WARMUP", "GEN_POLICY" or "STABLE".
const char* StageName(Stage stage);

/// What one step did.
struct StageStep {
  Stage before = Stage::kWarmup;
  Stage after = Stage::kWarmup;
  bool shift = false;  ///< unstable step after the loop was first seen stable: a sequence shift
  bool changed() const { return before != after; }
};

/// Not thread-safe.
class StageMachine {
 public:
  StageMachine(int m, int n) : m_(m), n_(n) {}

  /// Feeds the outcome of one comparison of adjacent iterations.
  StageStep Step(bool stable);

  /// New thresholds from the next step on (a live config reload); stage and counter are kept.
  void SetThresholds(int m, int n) {
    m_ = m;
    n_ = n;
  }

  /// While `hold` is set, GEN_POLICY ends only after more than n + `max_extra` stable steps;
  /// without it, after more than n (the paper's rule). Takes effect at the next step.
  void SetGenPolicyHold(bool hold, int max_extra) {
    hold_ = hold;
    max_extra_ = max_extra;
  }

  /// The hold is off (SetGenPolicyHold(false, ...)) and GEN_POLICY already had more than n
  /// stable steps: STABLE now. Otherwise nothing changes (the returned step is unchanged).
  StageStep Release();

  /// The sequence just seen is one the session already chose a plan for (plan_memory.h): STABLE
  /// now, from any stage, with the stable-step count reset. The loop counts as seen stable: the
  /// next unstable step is a shift.
  StageStep Resume();

  /// The sequence just seen is one whose GEN_POLICY was cut short by a shift, its trials kept
  /// (plan_memory.h): GEN_POLICY now, from any stage, with n stable steps counted, so that it
  /// moves to STABLE as soon as the hold lets go (every configuration measured), or at the next
  /// stable step without one. The loop counts as seen stable.
  StageStep ResumePlanning();

  /// STABLE's plan runs short under a repeated variant of the sequence it was planned for (one
  /// the comparison calls stable, so no shift): GEN_POLICY again, counter reset, to plan the
  /// variant as a sequence of its own. Only from STABLE (otherwise nothing changes).
  StageStep Replan();

  Stage stage() const { return stage_; }
  int stable_steps() const { return stable_steps_; }
  /// Stable steps the hold kept in the last (or current) GEN_POLICY beyond n.
  int held_steps() const { return held_steps_; }
  std::uint64_t shifts() const { return shifts_; }

 private:
  int m_;
  int n_;
  Stage stage_ = Stage::kWarmup;
  int stable_steps_ = 0;  // consecutive stable steps in the current stage
  std::uint64_t shifts_ = 0;
  bool seen_stable_ = false;  // unstable steps before the first stable one are warm-up, not shifts
  bool hold_ = false;
  int max_extra_ = 0;
  int held_steps_ = 0;
};

}  // namespace chameleon::daemon
