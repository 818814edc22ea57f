// FreeRangeCache on simgpu: a freed range whose chunks nobody reused is taken back whole with no
// driver call; a stale one is unmapped by a flush (never by a reuse) and its VA reused.
#include "parts_fixture.h"

namespace swap_test {
namespace {

class FreeRangeCacheTest : public PartsFixture {
 protected:
  /// A range of `n` chunks, mapped and filled with `seed`, then cached (as a free would).
  CUdeviceptr CacheFilled(std::uint32_t n, std::uint32_t seed, std::vector<std::uint32_t>* ids) {
    CUdeviceptr va = 0;
    EXPECT_CU(vmm_->Reserve(&va, n * kChunk));
    EXPECT_CU(chunks_->Take(n, compute_, ids));
    EXPECT_CU(vmm_->Map(va, *ids));
    EXPECT_CU(Fill(va, n * kChunk, seed, compute_));
    free_ranges_->Cache(va, n * kChunk, *ids, fences_->Record(compute_));
    return va;
  }
};

TEST_F(FreeRangeCacheTest, ShouldHandBackAnIntactRangeWholeWithoutADriverCall) {
  StartParts();
  std::vector<std::uint32_t> ids;
  const CUdeviceptr va = CacheFilled(2, 4, &ids);
  const std::uint64_t vmm = Count(counters_.vmm_calls);
  std::vector<std::uint32_t> got;
  EXPECT_EQ(free_ranges_->Reuse(4 * kChunk, other_, &got), 0u);  // another span: nothing
  EXPECT_EQ(free_ranges_->Reuse(2 * kChunk, other_, &got), va);
  EXPECT_EQ(got, ids);
  EXPECT_EQ(Count(counters_.range_reuses), 1u);
  EXPECT_EQ(Count(counters_.vmm_calls), vmm);
  // `other_` waited for the free: it sees the data written before it on compute_.
  ASSERT_CU(Check(va, 2 * kChunk, 4, other_, 0));
  ASSERT_CU(stream_sync_(other_));
  EXPECT_EQ(results_[0], 0u);
  EXPECT_EQ(free_ranges_->size(), 0u);
  table_.Add(va, 2 * kChunk, 2 * kChunk)->chunks = got;  // TearDown unmaps and frees it
}

TEST_F(FreeRangeCacheTest, ShouldUnmapAStaleRangeOnlyInAFlushAndThenReuseItsVa) {
  StartParts(/*limit=*/2 * kChunk);
  std::vector<std::uint32_t> ids;
  const CUdeviceptr va = CacheFilled(2, 4, &ids);
  std::vector<std::uint32_t> taken;
  ASSERT_CU(chunks_->Take(2, compute_, &taken));  // someone else reuses the chunks: stale
  std::vector<std::uint32_t> got;
  EXPECT_EQ(free_ranges_->Reuse(2 * kChunk, compute_, &got), 0u);
  EXPECT_EQ(Count(counters_.unmaps), 0u);  // never unmapped by a reuse
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(free_ranges_->Flush(/*all=*/false), 1u);
  EXPECT_EQ(free_ranges_->mapped(), 0u);
  EXPECT_EQ(free_ranges_->Reuse(2 * kChunk, compute_, &got), va);  // the VA, unmapped
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(Count(counters_.range_reuses), 0u);
  vmm_->FreeAddress(va, 2 * kChunk);
  chunks_->Release(taken, nullptr, nullptr);
}

TEST_F(FreeRangeCacheTest, ShouldKeepIntactRangesOnAPlainFlushAndUnmapThemOnAFullOne) {
  StartParts();
  std::vector<std::uint32_t> ids;
  CacheFilled(1, 4, &ids);
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(free_ranges_->Flush(/*all=*/false), 0u);  // still reusable as is
  EXPECT_EQ(free_ranges_->mapped(), 1u);
  EXPECT_EQ(free_ranges_->Flush(/*all=*/true), 1u);  // a trim: its chunks must really go
  EXPECT_EQ(free_ranges_->mapped(), 0u);
  EXPECT_EQ(free_ranges_->size(), 1u);  // its VA stays cached
  EXPECT_EQ(chunks_->Trim(), kChunk);
}

}  // namespace
}  // namespace swap_test
