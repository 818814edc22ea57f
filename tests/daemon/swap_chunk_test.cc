#include "chameleon/daemon/swap_chunk.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

TEST(SwapChunkTest, ShouldRoundASwapUpToWholeChunks) {
  EXPECT_EQ(SwapSpan(1), 2 * kMiB);
  EXPECT_EQ(SwapSpan(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(SwapSpan(2 * kMiB + 1), 4 * kMiB);
}

TEST(SwapChunkTest, ShouldKeepTwoChunksFreeAndFromAOneGibLimitOnFour) {
  const std::uint64_t chunk = 2 * kMiB;
  EXPECT_EQ(DefaultReserveBytes(16 * kMiB, chunk), 0u);  // 8 chunks: nothing to spare
  EXPECT_EQ(DefaultReserveBytes(16 * kMiB + 1, chunk), 4 * kMiB);
  EXPECT_EQ(DefaultReserveBytes(48'097'409, chunk), 4 * kMiB);  // the small trainer at peak / 4
  EXPECT_EQ(DefaultReserveBytes((1ull << 30) - 1, chunk), 4 * kMiB);
  EXPECT_EQ(DefaultReserveBytes(1ull << 30, chunk), 8 * kMiB);
  // GPT-2 XL B8 S1024 at 0.75 of its peak: four chunks, not 1 % (ReserveFeedback raises it).
  EXPECT_EQ(DefaultReserveBytes(33'672'617'190, chunk), 4 * chunk);
  EXPECT_EQ(DefaultReserveBytes(1ull << 30, 32 * kMiB), 128 * kMiB);  // four of the plan's chunks
}

}  // namespace
}  // namespace chameleon::daemon
