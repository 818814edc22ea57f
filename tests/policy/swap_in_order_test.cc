// DropSwapsRedundantUntilUse (policy/src/swap_in_order.h): on hand-made plans whose answer is
// computed by hand. Six ops, limit 200; ops 1-4 hold 300 bytes (100 over) unless said otherwise.
#include "swap_in_order.h"

#include <gtest/gtest.h>

#include <vector>

namespace chameleon::policy::detail {
namespace {

PlannedSwap Swap(std::uint32_t tensor, std::uint32_t free_from, std::uint32_t in_start,
                 std::uint32_t use) {
  PlannedSwap s;
  s.tensor = tensor;
  s.bytes = 100;
  s.out_after_op = free_from - 1;
  s.free_from_op = free_from;
  s.in_start_op = in_start;
  s.use_op = use;
  return s;
}

const std::vector<std::uint64_t> kOneOver = {0, 300, 300, 300, 300, 0};

TEST(PolicySwapInOrder, ShouldDropASwapTheOthersCoverWhenTheyStayOffUntilTheirUse) {
  // A is placed with its swap-in at op 3 (it relieves ops 1-2), B relieves ops 3-4. Off until its
  // use (op 5), A alone covers ops 1-4: B moves 100 bytes each way for nothing.
  std::vector<PlannedSwap> swaps = {Swap(0, 1, 3, 5), Swap(1, 3, 5, 5)};
  EXPECT_EQ(DropSwapsRedundantUntilUse(kOneOver, 200, &swaps), 1u);
  ASSERT_EQ(swaps.size(), 1u);
  EXPECT_EQ(swaps[0].tensor, 0u);
}

TEST(PolicySwapInOrder, ShouldKeepEverySwapWhenEachIsNeeded) {
  // 200 over at ops 1-4: both swaps, off over the whole range, are needed.
  std::vector<PlannedSwap> swaps = {Swap(0, 1, 5, 5), Swap(1, 1, 5, 5)};
  EXPECT_EQ(DropSwapsRedundantUntilUse({0, 400, 400, 400, 400, 0}, 200, &swaps), 0u);
  EXPECT_EQ(swaps.size(), 2u);
}

TEST(PolicySwapInOrder, ShouldCountOnlyThePlacedReliefOfASwapInIssuedForTheNextIteration) {
  // A's swap-in (op 3) serves a use in the next iteration (op 7 = op 1 + 6): the in-stream order
  // pass leaves it where it is, so it relieves ops 1-2 only and B is still needed for ops 3-4.
  std::vector<PlannedSwap> swaps = {Swap(0, 1, 3, 7), Swap(1, 3, 5, 5)};
  EXPECT_EQ(DropSwapsRedundantUntilUse(kOneOver, 200, &swaps), 0u);
  EXPECT_EQ(swaps.size(), 2u);
}

TEST(PolicySwapInOrder, ShouldLeaveAPlanThatDoesNotFitAlone) {
  std::vector<PlannedSwap> swaps = {Swap(0, 1, 5, 5)};
  EXPECT_EQ(DropSwapsRedundantUntilUse({0, 400, 400, 400, 400, 0}, 200, &swaps), 0u);
  EXPECT_EQ(swaps.size(), 1u);
}

}  // namespace
}  // namespace chameleon::policy::detail
