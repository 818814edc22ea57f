#include "chameleon/daemon/stage_machine.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

TEST(StageMachine, MovesToGenPolicyAfterMoreThanMStableSteps) {
  StageMachine machine(2, 5);
  EXPECT_EQ(machine.Step(true).after, Stage::kWarmup);
  EXPECT_EQ(machine.Step(true).after, Stage::kWarmup);
  const StageStep third = machine.Step(true);
  EXPECT_TRUE(third.changed());
  EXPECT_EQ(third.after, Stage::kGenPolicy);
}

TEST(StageMachine, MovesToStableAfterMoreThanNStableStepsInGenPolicy) {
  StageMachine machine(2, 5);
  for (int i = 0; i < 3; ++i) machine.Step(true);
  ASSERT_EQ(machine.stage(), Stage::kGenPolicy);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(machine.Step(true).after, Stage::kGenPolicy) << i;
  EXPECT_EQ(machine.Step(true).after, Stage::kStable);
  EXPECT_EQ(machine.Step(true).after, Stage::kStable);
}

TEST(StageMachine, AnyUnstableStepReturnsToWarmupAndResetsTheCounter) {
  StageMachine machine(2, 5);
  for (int i = 0; i < 9; ++i) machine.Step(true);
  ASSERT_EQ(machine.stage(), Stage::kStable);
  const StageStep step = machine.Step(false);
  EXPECT_EQ(step.before, Stage::kStable);
  EXPECT_EQ(step.after, Stage::kWarmup);
  EXPECT_TRUE(step.shift);
  EXPECT_EQ(machine.stable_steps(), 0);
  machine.Step(true);
  machine.Step(true);
  EXPECT_EQ(machine.stage(), Stage::kWarmup);
  machine.Step(false);
  machine.Step(true);
  machine.Step(true);
  EXPECT_EQ(machine.stage(), Stage::kWarmup);  // the counter restarted
  EXPECT_EQ(machine.Step(true).after, Stage::kGenPolicy);
  EXPECT_EQ(machine.shifts(), 2u);
}

TEST(StageMachine, UnstableStepsBeforeTheFirstStableOneAreNotShifts) {
  StageMachine machine(2, 5);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(machine.Step(false).shift);
  machine.Step(true);
  EXPECT_TRUE(machine.Step(false).shift);
  EXPECT_TRUE(machine.Step(false).shift);  // each change of the sequence is a shift
  EXPECT_EQ(machine.shifts(), 2u);
}

TEST(StageMachine, AHoldKeepsGenPolicyUntilReleasedOrItsBudgetIsSpent) {
  StageMachine machine(2, 5);
  for (int i = 0; i < 3; ++i) machine.Step(true);
  ASSERT_EQ(machine.stage(), Stage::kGenPolicy);
  machine.SetGenPolicyHold(true, 4);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(machine.Step(true).after, Stage::kGenPolicy) << i;
  EXPECT_EQ(machine.held_steps(), 3);  // steps 6, 7 and 8 of GEN_POLICY
  machine.SetGenPolicyHold(false, 4);  // released past n: the next stable step moves on
  EXPECT_EQ(machine.Step(true).after, Stage::kStable);

  StageMachine capped(2, 5);
  for (int i = 0; i < 3; ++i) capped.Step(true);
  capped.SetGenPolicyHold(true, 4);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(capped.Step(true).after, Stage::kGenPolicy) << i;
  EXPECT_EQ(capped.Step(true).after, Stage::kStable);  // more than n + 4 stable steps
  EXPECT_EQ(capped.held_steps(), 4);
}

// The last candidate's measurement arrives between two steps: letting go of the hold then moves
// to STABLE at once, not at the next stable step (issue 18: no iteration lost to waiting).
TEST(StageMachine, ShouldMoveToStableTheMomentAHoldPastNIsReleased) {
  StageMachine machine(2, 5);
  for (int i = 0; i < 3; ++i) machine.Step(true);
  ASSERT_EQ(machine.stage(), Stage::kGenPolicy);
  machine.SetGenPolicyHold(true, 8);
  for (int i = 0; i < 5; ++i) machine.Step(true);
  // Released before n stable steps: the paper's n still applies.
  machine.SetGenPolicyHold(false, 8);
  EXPECT_FALSE(machine.Release().changed());
  EXPECT_EQ(machine.stage(), Stage::kGenPolicy);
  machine.SetGenPolicyHold(true, 8);
  EXPECT_EQ(machine.Step(true).after, Stage::kGenPolicy);  // the (n + 1)-th step, held
  EXPECT_FALSE(machine.Release().changed());               // still held: nothing
  machine.SetGenPolicyHold(false, 8);
  const StageStep step = machine.Release();
  EXPECT_EQ(step.before, Stage::kGenPolicy);
  EXPECT_EQ(step.after, Stage::kStable);
  EXPECT_EQ(machine.stage(), Stage::kStable);
  EXPECT_FALSE(machine.Release().changed());  // once
  EXPECT_EQ(machine.Step(true).after, Stage::kStable);
}

TEST(StageMachine, ZeroThresholdsMoveOnTheFirstStableStep) {
  StageMachine machine(0, 0);
  EXPECT_EQ(machine.Step(true).after, Stage::kGenPolicy);
  EXPECT_EQ(machine.Step(true).after, Stage::kStable);
}

TEST(StageMachine, StageNames) {
  EXPECT_STREQ(StageName(Stage::kWarmup), "WARMUP");
  EXPECT_STREQ(StageName(Stage::kGenPolicy), "GEN_POLICY");
  EXPECT_STREQ(StageName(Stage::kStable), "STABLE");
}

TEST(StageMachine, ResumeIsStableAtOnceFromAnyStageAndTheNextUnstableStepIsAShift) {
  for (int warm_steps : {0, 1, 4}) {  // WARMUP, WARMUP after a stable step, GEN_POLICY
    StageMachine machine(2, 5);
    for (int i = 0; i < warm_steps; ++i) machine.Step(true);
    const StageStep step = machine.Resume();
    EXPECT_EQ(step.after, Stage::kStable) << warm_steps;
    EXPECT_EQ(step.changed(), step.before != Stage::kStable);
    EXPECT_EQ(machine.stable_steps(), 0);
    EXPECT_EQ(machine.Step(true).after, Stage::kStable);
    const StageStep shift = machine.Step(false);
    EXPECT_EQ(shift.after, Stage::kWarmup);
    EXPECT_TRUE(shift.shift) << "leaving a sequence seen stable is a shift";
  }
}

TEST(StageMachine, ReplanReturnsFromStableToGenPolicyAndNothingElseMoves) {
  StageMachine machine(2, 5);
  EXPECT_FALSE(machine.Replan().changed());  // WARMUP stays
  for (int i = 0; i < 3; ++i) machine.Step(true);
  ASSERT_EQ(machine.stage(), Stage::kGenPolicy);
  EXPECT_FALSE(machine.Replan().changed());  // GEN_POLICY stays, its count too
  EXPECT_EQ(machine.stable_steps(), 0);
  for (int i = 0; i < 6; ++i) machine.Step(true);
  ASSERT_EQ(machine.stage(), Stage::kStable);
  const StageStep step = machine.Replan();
  EXPECT_EQ(step.before, Stage::kStable);
  EXPECT_EQ(step.after, Stage::kGenPolicy);
  EXPECT_EQ(machine.shifts(), 0u);  // not a shift
  for (int i = 0; i < 5; ++i) EXPECT_EQ(machine.Step(true).after, Stage::kGenPolicy) << i;
  EXPECT_EQ(machine.Step(true).after, Stage::kStable);  // n more stable steps, as any GEN_POLICY
}

}  // namespace
TEST(StageMachine, ResumePlanningIsGenPolicyWithItsStepsServed) {
  for (int warm_steps : {0, 1, 4, 9}) {  // WARMUP, WARMUP, GEN_POLICY, STABLE
    StageMachine machine(2, 5);
    for (int i = 0; i < warm_steps; ++i) machine.Step(true);
    EXPECT_EQ(machine.ResumePlanning().after, Stage::kGenPolicy) << warm_steps;
    // Held while its candidates are measured ...
    machine.SetGenPolicyHold(true, 3);
    EXPECT_EQ(machine.Step(true).after, Stage::kGenPolicy) << warm_steps;
    // ... and STABLE as soon as the hold lets go.
    machine.SetGenPolicyHold(false, 3);
    EXPECT_EQ(machine.Release().after, Stage::kStable) << warm_steps;
    EXPECT_TRUE(machine.Step(false).shift) << "the loop counts as seen stable";
  }
}

TEST(StageMachine, ResumePlanningWithoutAHoldIsStableAtTheNextStableStep) {
  StageMachine machine(2, 5);
  machine.ResumePlanning();
  EXPECT_EQ(machine.Step(true).after, Stage::kStable);
}

}  // namespace chameleon::daemon
