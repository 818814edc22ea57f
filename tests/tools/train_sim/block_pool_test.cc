// The caching/expandable allocators' block bookkeeping and PyTorch size classes.
#include "block_pool.h"

#include <gtest/gtest.h>

#include "size_classes.h"

namespace chameleon::train_sim {
namespace {

constexpr CUdeviceptr kBase = 0x100000;

TEST(BlockPoolTest, ShouldTakeTheBestFitAndSplitTheRest) {
  BlockPool pool;
  pool.AddFree(kBase, 4096, 0);
  pool.AddFree(kBase + 0x10000, 1024, 1);
  // 1024 fits both; the smaller free block (segment 1) is the best fit.
  EXPECT_EQ(pool.Take(1024, 512), kBase + 0x10000);
  EXPECT_EQ(pool.Take(1024, 512), kBase);
  // The remainder of the 4096 block was split off and serves the next request.
  EXPECT_EQ(pool.Take(3072, 512), kBase + 1024);
  EXPECT_FALSE(pool.Take(512, 512).has_value());
}

TEST(BlockPoolTest, ShouldNotSplitRemaindersBelowTheThreshold) {
  BlockPool pool;
  pool.AddFree(kBase, 4096, 0);
  EXPECT_EQ(pool.Take(3584, 1024), kBase);  // 512 left < 1024: the whole block is handed out
  EXPECT_FALSE(pool.Take(512, 512).has_value());
  EXPECT_TRUE(pool.Release(kBase));
  EXPECT_EQ(pool.Take(4096, 512), kBase);  // released whole
}

TEST(BlockPoolTest, ShouldMergeFreeNeighboursWithinASegmentOnly) {
  BlockPool pool;
  pool.AddFree(kBase, 2048, 0);
  pool.AddFree(kBase + 2048, 2048, 1);  // adjacent but another segment
  const auto a = pool.Take(1024, 512), b = pool.Take(1024, 512);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(pool.Release(*a));
  EXPECT_TRUE(pool.Release(*b));
  // Segment 0 is whole again, but never fused with segment 1.
  EXPECT_FALSE(pool.Take(4096, 512).has_value());
  EXPECT_EQ(pool.Take(2048, 512), kBase);
  EXPECT_EQ(pool.Take(2048, 512), kBase + 2048);
}

TEST(BlockPoolTest, ShouldReportTheFreeTailForGrowingInPlace) {
  BlockPool pool;
  pool.AddFree(kBase, 4096, 0);
  ASSERT_EQ(pool.Take(1024, 512), kBase);
  EXPECT_EQ(pool.FreeTailBytes(kBase + 4096, 0), 3072u);
  EXPECT_EQ(pool.FreeTailBytes(kBase + 4096, 1), 0u);
  // Growing adds a region right after the tail, which merges with it.
  pool.AddFree(kBase + 4096, 4096, 0);
  EXPECT_EQ(pool.Take(7168, 512), kBase + 1024);
  EXPECT_EQ(pool.FreeTailBytes(kBase + 8192, 0), 0u);
}

TEST(BlockPoolTest, ShouldRejectUnknownOrDoubleReleases) {
  BlockPool pool;
  pool.AddFree(kBase, 4096, 0);
  const auto a = pool.Take(1024, 512);
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.Release(kBase + 512));
  EXPECT_TRUE(pool.Release(*a));
  EXPECT_FALSE(pool.Release(*a));
}

TEST(SizeClassesTest, ShouldFollowPyTorchsCachingAllocator) {
  namespace sc = size_classes;
  EXPECT_EQ(sc::RoundRequest(1), 512u);
  EXPECT_EQ(sc::RoundRequest(513), 1024u);
  EXPECT_TRUE(sc::IsSmall(1 << 20));
  EXPECT_FALSE(sc::IsSmall((1 << 20) + 512));
  EXPECT_EQ(sc::SegmentBytes(4096), 2u << 20);
  EXPECT_EQ(sc::SegmentBytes(3u << 20), 20u << 20);
  EXPECT_EQ(sc::SegmentBytes((10u << 20) + 512), 12u << 20);
}

}  // namespace
}  // namespace chameleon::train_sim
