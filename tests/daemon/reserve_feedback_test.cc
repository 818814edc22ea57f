#include "chameleon/daemon/reserve_feedback.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kChunk = 2 * kMiB;

/// One mark: its generation in force, the eviction count read with it, and whether OnMark must
/// ask for a larger reserve.
struct Mark {
  std::uint64_t generation;
  std::uint64_t evictions;
  bool asks;
};

/// Feeds `marks` to `f` in order, checking each answer.
void ExpectMarks(ReserveFeedback& f, std::initializer_list<Mark> marks) {
  int i = 0;
  for (const Mark& m : marks) {
    EXPECT_EQ(f.OnMark(m.generation, m.evictions), m.asks) << "mark " << i;
    ++i;
  }
}

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
  ExpectMarks(f, {{3, 0, false}, {3, 5, false}});  // evicted, but nothing watched yet
  f.Watch(4);
  ExpectMarks(f, {{4, 9, false},    // the interval under 3 evicted: not the watched plan
                  {4, 12, false},   // the first interval under 4: not steady
                  {4, 12, false},   // steady, no eviction
                  {4, 13, true}});  // steady and evicted
  EXPECT_EQ(f.watched(), 4u);
}

TEST(ReserveFeedbackTest, ShouldWatchARepublishedOrReplannedPlanFromItsFirstIntervalAgain) {
  ReserveFeedback f;
  f.Watch(2);
  ExpectMarks(f, {{2, 0, false}, {2, 1, false}, {2, 2, true}});  // the first under 2 is skipped
  f.Raise();
  EXPECT_EQ(f.level(), 1u);
  EXPECT_TRUE(f.replan_wanted());
  ExpectMarks(f, {{2, 3, false}});  // nothing watched until the re-plan is published
  f.Replanning();
  EXPECT_FALSE(f.replan_wanted());
  f.Watch(5);
  ExpectMarks(f, {{5, 4, false},  // the interval under 2
                  {5, 5, false},  // the first under 5 (leftovers of the switch)
                  {5, 5, false},
                  {5, 6, true}});
}

TEST(ReserveFeedbackTest, ShouldNotReadACounterThatWentBackwardsAsAnEviction) {
  ReserveFeedback f;
  f.Watch(1);
  ExpectMarks(f, {{1, 100, false},
                  {1, 100, false},  // first under 1
                  {1, 7, false},    // backwards: no eviction, and the new reference
                  {1, 7, false},
                  {1, 8, true}});
}

TEST(ReserveFeedbackTest, ShouldStopWatchingWhenToldNoPlan) {
  ReserveFeedback f;
  f.Watch(1);
  ExpectMarks(f, {{1, 0, false}, {1, 0, false}});
  f.Watch(0);  // a stage left STABLE
  ExpectMarks(f, {{1, 1, false}, {1, 2, false}});
  EXPECT_EQ(f.level(), 0u);
}

}  // namespace
}  // namespace chameleon::daemon
