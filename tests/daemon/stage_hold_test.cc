#include "chameleon/daemon/stage_hold.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

TEST(StageHold, HoldsOnlyWhileCandidatesArePending) {
  StageHold hold;
  EXPECT_TRUE(hold.Update(1, 10, 1, true));
  EXPECT_TRUE(hold.held());
  EXPECT_FALSE(hold.Update(1, 10, 2, false));
  EXPECT_FALSE(hold.held());
}

TEST(StageHold, LetsGoAfterBothStallIterationsAndStallTimeWithoutProgress) {
  StageHold hold;
  ASSERT_TRUE(hold.Update(5, 100, kSecond, true));
  // Many iterations but not a second: still held (a fast loop during the mailbox poll).
  EXPECT_TRUE(hold.Update(5, 100 + StageHold::kStallIterations + 1, kSecond + kSecond / 2, true));
  // A long time but few iterations: still held (a slow loop).
  EXPECT_TRUE(hold.Update(5, 100 + StageHold::kStallIterations, 3 * kSecond, true));
  // Both: stalled.
  EXPECT_FALSE(hold.Update(5, 100 + StageHold::kStallIterations + 1, 3 * kSecond, true));
}

TEST(StageHold, ProgressRestartsTheStallClock) {
  StageHold hold;
  ASSERT_TRUE(hold.Update(5, 100, kSecond, true));
  EXPECT_TRUE(hold.Update(6, 110, 5 * kSecond, true));  // progress: counted from here
  EXPECT_TRUE(hold.Update(6, 110 + StageHold::kStallIterations + 1, 5 * kSecond + kSecond, true));
  EXPECT_FALSE(hold.Update(6, 110 + StageHold::kStallIterations + 1, 6 * kSecond + 1, true));
}

TEST(StageHold, MaxStepsGrowsWithTheConfigurations) {
  EXPECT_EQ(StageHold::MaxSteps(0), 0);
  EXPECT_EQ(StageHold::MaxSteps(6), 6 * StageHold::kStepsPerCandidate);
}

}  // namespace
}  // namespace chameleon::daemon
