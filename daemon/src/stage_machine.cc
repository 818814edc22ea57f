#include "chameleon/daemon/stage_machine.h"

namespace chameleon::daemon {

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kWarmup:
      return "WARMUP";
    case Stage::kGenPolicy:
      return "GEN_POLICY";
    case Stage::kStable:
      return "STABLE";
  }
  return "UNKNOWN";
}

StageStep StageMachine::Step(bool stable) {
  StageStep step;
  step.before = stage_;
  if (!stable) {
    step.shift = seen_stable_;
    if (step.shift) ++shifts_;
    stage_ = Stage::kWarmup;
    stable_steps_ = 0;
  } else {
    seen_stable_ = true;
    if (stage_ == Stage::kWarmup && ++stable_steps_ > m_) {
      stage_ = Stage::kGenPolicy;
      stable_steps_ = 0;
      held_steps_ = 0;
    } else if (stage_ == Stage::kGenPolicy && ++stable_steps_ > n_) {
      if (hold_ && stable_steps_ <= n_ + max_extra_) {
        ++held_steps_;
      } else {
        stage_ = Stage::kStable;
        stable_steps_ = 0;
      }
    }
  }
  step.after = stage_;
  return step;
}

StageStep StageMachine::Release() {
  StageStep step;
  step.before = stage_;
  if (stage_ == Stage::kGenPolicy && !hold_ && stable_steps_ > n_) {
    stage_ = Stage::kStable;
    stable_steps_ = 0;
  }
  step.after = stage_;
  return step;
}

StageStep StageMachine::Resume() {
  StageStep step;
  step.before = stage_;
  stage_ = Stage::kStable;
  stable_steps_ = 0;
  held_steps_ = 0;
  seen_stable_ = true;  // a sequence seen stable before: leaving it is a shift
  step.after = stage_;
  return step;
}

StageStep StageMachine::ResumePlanning() {
  StageStep step;
  step.before = stage_;
  stage_ = Stage::kGenPolicy;
  stable_steps_ = n_;
  held_steps_ = 0;
  seen_stable_ = true;
  step.after = stage_;
  return step;
}

StageStep StageMachine::Replan() {
  StageStep step;
  step.before = stage_;
  if (stage_ == Stage::kStable) {
    stage_ = Stage::kGenPolicy;
    stable_steps_ = 0;
    held_steps_ = 0;
  }
  step.after = stage_;
  return step;
}

}  // namespace chameleon::daemon
