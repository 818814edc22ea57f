// The 1F1B schedule and the layer split against hand-written sequences.
#include "pipeline_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace chameleon::train_sim {
namespace {

constexpr bool F = true, B = false;

TEST(PipelineScheduleTest, ShouldWarmUpAlternateAndCoolDownAsOneFOneB) {
  // 4 stages, 6 micro-batches. Stage 0: warm-up 3, steady F3 B0 F4 B1 F5 B2, cool-down B3-B5.
  const std::vector<PipelineAction> stage0 = {{F, 0}, {F, 1}, {F, 2}, {F, 3}, {B, 0}, {F, 4},
                                              {B, 1}, {F, 5}, {B, 2}, {B, 3}, {B, 4}, {B, 5}};
  EXPECT_EQ(OneForwardOneBackward(4, 0, 6), stage0);
  // The last stage has no warm-up: F B F B ...
  const std::vector<PipelineAction> stage3 = {{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2},
                                              {F, 3}, {B, 3}, {F, 4}, {B, 4}, {F, 5}, {B, 5}};
  EXPECT_EQ(OneForwardOneBackward(4, 3, 6), stage3);
  // Fewer micro-batches than the warm-up: all forwards, then all backwards.
  const std::vector<PipelineAction> short0 = {{F, 0}, {F, 1}, {B, 0}, {B, 1}};
  EXPECT_EQ(OneForwardOneBackward(4, 0, 2), short0);
}

TEST(PipelineScheduleTest, ShouldRunBackwardsInMicroBatchOrderOnEveryStage) {
  for (int stages = 1; stages <= 5; ++stages) {
    for (int stage = 0; stage < stages; ++stage) {
      int expected_f = 0, expected_b = 0, in_flight = 0, most = 0;
      for (const PipelineAction& a : OneForwardOneBackward(stages, stage, 7)) {
        EXPECT_EQ(a.micro_batch, a.forward ? expected_f++ : expected_b++);
        in_flight += a.forward ? 1 : -1;
        EXPECT_GE(in_flight, 0);
        most = std::max(most, in_flight);
      }
      EXPECT_EQ(expected_f, 7);
      EXPECT_EQ(expected_b, 7);
      EXPECT_EQ(most, stages - stage) << stages << " stages, stage " << stage;
    }
  }
}

TEST(PipelineScheduleTest, ShouldSplitLayersContiguouslyWithTheRemainderFirst) {
  // 10 layers over 4 stages: 3, 3, 2, 2.
  EXPECT_EQ(StageLayers(10, 4, 0).first, 0);
  EXPECT_EQ(StageLayers(10, 4, 0).end, 3);
  EXPECT_EQ(StageLayers(10, 4, 1).end, 6);
  EXPECT_EQ(StageLayers(10, 4, 2).first, 6);
  EXPECT_EQ(StageLayers(10, 4, 2).end, 8);
  EXPECT_EQ(StageLayers(10, 4, 3).end, 10);
  EXPECT_EQ(StageLayers(32, 4, 3).first, 24);
}

}  // namespace
}  // namespace chameleon::train_sim
