#include "chameleon/daemon/reserve_feedback.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kChunk = 2 * kMiB;

TEST(ReserveFeedbackTest, ShouldRaiseTheReserveToTheLargestOfTwiceFourChunksAndOnePercent) {
  // GPT-2 XL B8 S1024 at 0.75 of its peak: four chunks, then 1 % (161 chunks), then twice that.
  const std::uint64_t limit = 33'672'617'190;
  EXPECT_EQ(ReserveFeedback::ReserveAt(0, 4 * kChunk, limit, kChunk), 4 * kChunk);
  EXPECT_EQ(ReserveFeedback::ReserveAt(1, 4 * kChunk, limit, kChunk), 161 * kChunk);
  EXPECT_EQ(ReserveFeedback::ReserveAt(2, 4 * kChunk, limit, kChunk), 322 * kChunk);
  // A small limit (the small trainer at peak / 4, 48 MB): four chunks would be a sixth of it;
  // an eighth in whole chunks (2 chunks) is the cap, so two chunks cannot grow.
  EXPECT_EQ(ReserveFeedback::ReserveAt(1, 1, 48'097'409, kChunk), 2 * kChunk);
  EXPECT_EQ(ReserveFeedback::ReserveAt(3, 2 * kChunk, 48'097'409, kChunk), 2 * kChunk);
  // Never below the base, even above the cap (a configured reserve is the operator's).
  EXPECT_EQ(ReserveFeedback::ReserveAt(2, 10 * kChunk, 48'097'409, kChunk), 10 * kChunk);
  // Bounded by an eighth of the limit however high the level.
  EXPECT_EQ(ReserveFeedback::ReserveAt(40, 4 * kChunk, limit, kChunk), limit / 8 / kChunk * kChunk);
}

TEST(ReserveFeedbackTest, ShouldAskOnlyWhenASteadyIntervalUnderTheWatchedPlanEvicts) {
  ReserveFeedback f;
  // Marks carry the generation in force from their boundary on; the interval a mark ends ran
  // under the previous mark's generation.
  EXPECT_FALSE(f.OnMark(3, 0));
  EXPECT_FALSE(f.OnMark(3, 5));  // evicted, but nothing watched yet
  f.Watch(4);
  EXPECT_FALSE(f.OnMark(4, 9));   // the interval under 3 evicted: not the watched plan
  EXPECT_FALSE(f.OnMark(4, 12));  // the first interval under 4: not steady
  EXPECT_FALSE(f.OnMark(4, 12));  // steady, no eviction
  EXPECT_TRUE(f.OnMark(4, 13));   // steady and evicted
  EXPECT_EQ(f.watched(), 4u);
}

TEST(ReserveFeedbackTest, ShouldWatchARepublishedOrReplannedPlanFromItsFirstIntervalAgain) {
  ReserveFeedback f;
  f.Watch(2);
  EXPECT_FALSE(f.OnMark(2, 0));
  EXPECT_FALSE(f.OnMark(2, 1));  // first under 2
  EXPECT_TRUE(f.OnMark(2, 2));
  f.Raise();
  EXPECT_EQ(f.level(), 1u);
  EXPECT_TRUE(f.replan_wanted());
  EXPECT_FALSE(f.OnMark(2, 3));  // nothing watched until the re-plan is published
  f.Replanning();
  EXPECT_FALSE(f.replan_wanted());
  f.Watch(5);
  EXPECT_FALSE(f.OnMark(5, 4));  // the interval under 2
  EXPECT_FALSE(f.OnMark(5, 5));  // the first under 5 (leftovers of the switch)
  EXPECT_FALSE(f.OnMark(5, 5));
  EXPECT_TRUE(f.OnMark(5, 6));
}

TEST(ReserveFeedbackTest, ShouldNotReadACounterThatWentBackwardsAsAnEviction) {
  ReserveFeedback f;
  f.Watch(1);
  EXPECT_FALSE(f.OnMark(1, 100));
  EXPECT_FALSE(f.OnMark(1, 100));  // first under 1
  EXPECT_FALSE(f.OnMark(1, 7));    // backwards: no eviction, and the new reference
  EXPECT_FALSE(f.OnMark(1, 7));
  EXPECT_TRUE(f.OnMark(1, 8));
}

TEST(ReserveFeedbackTest, ShouldStopWatchingWhenToldNoPlan) {
  ReserveFeedback f;
  f.Watch(1);
  EXPECT_FALSE(f.OnMark(1, 0));
  EXPECT_FALSE(f.OnMark(1, 0));
  f.Watch(0);  // a stage left STABLE
  EXPECT_FALSE(f.OnMark(1, 1));
  EXPECT_FALSE(f.OnMark(1, 2));
  EXPECT_EQ(f.level(), 0u);
}

}  // namespace
}  // namespace chameleon::daemon
