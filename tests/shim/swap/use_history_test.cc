// UseHistory: the previous iteration's use positions per allocation, keyed so that the next
// iteration's counterparts find them (long-lived ids, ordinals of the iteration's allocations),
// and the next use after a position, worked out by hand below.
#include "swap/use_history.h"

#include <gtest/gtest.h>

#include <vector>

namespace swap_test {
namespace {

namespace sw = chameleon::shim::swap;

void Use(sw::UseHistory* h, std::uint32_t position, std::vector<sw::AllocId> ids) {
  h->Record(position, ids.data(), static_cast<std::uint32_t>(ids.size()));
}

// One iteration of a toy trainer: weight W (id 1, allocated before the first boundary) is used
// at ops 0 and 6; the step allocates activations A (ordinal 0) and B (ordinal 1): A used at
// ops 1 and 5, B at ops 2 and 4; 8 ops in all.
void Step(sw::UseHistory* h, sw::AllocId a, sw::AllocId b) {
  Use(h, 0, {1});
  Use(h, 1, {a});
  Use(h, 2, {b});
  Use(h, 4, {b});
  Use(h, 5, {a});
  Use(h, 6, {1});
}

TEST(UseHistoryTest, NextUseComesFromThePreviousIterationsCounterpart) {
  sw::UseHistory h;
  EXPECT_FALSE(h.known());
  Use(&h, 0, {1});  // before the first boundary: not an iteration, never read
  h.Close(3, /*next_id=*/2);
  EXPECT_FALSE(h.known());
  Step(&h, 2, 3);  // iteration 1: A = 2, B = 3
  h.Close(8, /*next_id=*/4);
  ASSERT_TRUE(h.known());
  // Iteration 2 allocates A = 4, B = 5: the same ordinals as 2 and 3.
  EXPECT_EQ(h.NextUse(4, 0), 1u);
  EXPECT_EQ(h.NextUse(4, 1), 5u);
  EXPECT_EQ(h.NextUse(5, 2), 4u);
  EXPECT_EQ(h.NextUse(1, 2), 6u);
  // After its last use a step's activation is never used again (it is freed): farthest.
  EXPECT_EQ(h.NextUse(4, 5), sw::UseHistory::kUnknown);
  // The weight lives on: its next use is its first one of the next iteration (8 + 0).
  EXPECT_EQ(h.NextUse(1, 6), 8u);
  // An allocation the previous iteration had no counterpart for.
  EXPECT_EQ(h.NextUse(6, 0), sw::UseHistory::kUnknown);
}

TEST(UseHistoryTest, AnIterationSkippedLeavesTheLastRecordedOneStandingForIt) {
  sw::UseHistory h;
  h.Close(0, /*next_id=*/2);
  Step(&h, 2, 3);  // iteration 1 recorded: A = 2, B = 3
  h.Close(8, /*next_id=*/4);
  // Iteration 2 (A = 4, B = 5) is not recorded, nor iteration 3 (A = 6, B = 7).
  h.Skip(8, /*next_id=*/6);
  h.Skip(8, /*next_id=*/8);
  ASSERT_TRUE(h.known());
  // Iteration 4 allocates A = 8, B = 9: their counterparts are iteration 1's.
  EXPECT_EQ(h.NextUse(8, 1), 5u);
  EXPECT_EQ(h.NextUse(9, 2), 4u);
  EXPECT_EQ(h.NextUse(1, 6), 8u);
  EXPECT_EQ(h.NextUse(8, 5), sw::UseHistory::kUnknown);
  // Recording again: iteration 4 is recorded with other uses, and becomes the one read.
  Use(&h, 3, {8});
  h.Close(8, /*next_id=*/10);
  ASSERT_TRUE(h.known());
  EXPECT_EQ(h.NextUse(10, 0), 3u);
  EXPECT_EQ(h.NextUse(11, 0), sw::UseHistory::kUnknown);
}

TEST(UseHistoryTest, AnAllocationOfThePreviousIterationIsKeyedByItsOrdinalThere) {
  sw::UseHistory h;
  h.Close(0, 1);
  // Iteration 1 allocates G (id 1, ordinal 0), used at op 3 and, in iteration 2, at op 1.
  Use(&h, 3, {1});
  h.Close(4, 2);
  // Iteration 2: G (now age 1) used at op 1; it allocates G' (id 2, ordinal 0) used at op 3.
  Use(&h, 1, {1});
  Use(&h, 3, {2});
  h.Close(4, 3);
  ASSERT_TRUE(h.known());
  // Iteration 3: G' is age 1 and finds G's age-1 uses (op 1); G (id 1) is now long-lived and
  // has no record as an id (it was keyed by ordinal), so nothing is known of it.
  EXPECT_EQ(h.NextUse(2, 0), 1u);
  EXPECT_EQ(h.NextUse(1, 0), sw::UseHistory::kUnknown);
}

// Two logs alternate: the one an iteration reuses still holds the entries of two iterations
// ago past what it wrote itself; they must not be read as its uses.
TEST(UseHistoryTest, ShouldNotReadTheUsesOfTwoIterationsAgo) {
  sw::UseHistory h;
  h.Close(0, 3);  // ids 1 and 2: long-lived
  Use(&h, 0, {1});
  Use(&h, 1, {2});
  Use(&h, 2, {2});
  Use(&h, 3, {2});  // iteration 1: four entries, id 2 in the last three
  h.Close(4, 3);
  Use(&h, 0, {1});  // iteration 2 writes the other log
  h.Close(1, 3);
  Use(&h, 5, {1});  // iteration 3 reuses iteration 1's log: one entry
  h.Close(6, 3);
  ASSERT_TRUE(h.known());
  EXPECT_EQ(h.NextUse(1, 0), 5u);
  EXPECT_EQ(h.NextUse(2, 0), sw::UseHistory::kUnknown);  // iteration 1's uses, two ago
  // And the lists follow each Close (built again at the next NextUse).
  Use(&h, 2, {2});
  h.Close(3, 3);
  EXPECT_EQ(h.NextUse(2, 0), 2u);
  EXPECT_EQ(h.NextUse(1, 0), sw::UseHistory::kUnknown);
}

TEST(UseHistoryTest, AnIterationBeyondTheLogsCapacityIsNotKnown) {
  sw::UseHistory h;
  h.Close(0, 5);  // ids 1-4 were allocated before: id 1 is long-lived
  std::vector<sw::AllocId> ids(1024, 1);
  for (std::uint32_t i = 0; i <= sw::UseHistory::kCapacity / 1024; ++i) {
    h.Record(i, ids.data(), static_cast<std::uint32_t>(ids.size()));
  }
  h.Close(65, 5);
  EXPECT_FALSE(h.known());  // the eviction rule falls back to closest size
  Use(&h, 0, {1});
  h.Close(1, 5);
  EXPECT_TRUE(h.known());
  EXPECT_EQ(h.NextUse(1, 0), 1u);  // wraps: position 0 of the next iteration of 1 op
}

}  // namespace
}  // namespace swap_test
