// VaMapper on simgpu: mapped chunks hold data at the VA, and every VMM call is counted by kind.
#include "parts_fixture.h"

namespace swap_test {
namespace {

TEST_F(PartsFixture, VaMapperMapsChunksAtAVaAndCountsEveryCall) {
  StartParts();
  CUdeviceptr va = 0;
  ASSERT_CU(vmm_->Reserve(&va, 3 * kChunk));
  EXPECT_EQ(va % kChunk, 0u);
  std::vector<std::uint32_t> chunks;
  ASSERT_CU(chunks_->Take(3, compute_, &chunks));
  ASSERT_CU(vmm_->Map(va, chunks));
  EXPECT_EQ(Count(counters_.vmm_maps), 4u);  // one cuMemMap per chunk + one cuMemSetAccess
  ASSERT_CU(Fill(va, 3 * kChunk, 11, compute_));
  EXPECT_EQ(Mismatches(va, 3 * kChunk, 11), 0u);
  ASSERT_CU(vmm_->Unmap(va, 3 * kChunk));
  EXPECT_EQ(Count(counters_.unmaps), 1u);
  EXPECT_EQ(Count(counters_.vmm_unmaps), 1u);
  vmm_->FreeAddress(va, 3 * kChunk);
  EXPECT_EQ(Count(counters_.vmm_reserves), 2u);
  // cuMemCreate of the three chunks is the pool's, counted as vmm_creates.
  EXPECT_EQ(Count(counters_.vmm_calls), 4u + 1u + 2u + Count(counters_.vmm_creates));
  chunks_->Release(chunks, nullptr, nullptr);
}

TEST_F(PartsFixture, VaMapperLeavesNothingMappedWhenAMapFails) {
  StartParts();
  CUdeviceptr va = 0;
  ASSERT_CU(vmm_->Reserve(&va, 2 * kChunk));
  std::vector<std::uint32_t> one, two;
  ASSERT_CU(chunks_->Take(1, compute_, &one));
  ASSERT_CU(chunks_->Take(2, compute_, &two));
  ASSERT_CU(vmm_->Map(va + kChunk, one));       // the second slot is taken
  EXPECT_NE(vmm_->Map(va, two), CUDA_SUCCESS);  // its second chunk collides
  // The first slot was unmapped again: mapping a chunk there works.
  std::vector<std::uint32_t> first(two.begin(), two.begin() + 1);
  EXPECT_CU(vmm_->Map(va, first));
  EXPECT_EQ(chunks_->mappings(first[0]), 1u);  // the failed map left no count behind
  EXPECT_EQ(chunks_->mappings(two[1]), 0u);
  EXPECT_CU(vmm_->Unmap(va, 2 * kChunk));
  // One unmap over both ranges drops both counts.
  EXPECT_EQ(chunks_->mappings(one[0]), 0u);
  EXPECT_EQ(chunks_->mappings(first[0]), 0u);
  vmm_->FreeAddress(va, 2 * kChunk);
  chunks_->Release(one, nullptr, nullptr);
  chunks_->Release(two, nullptr, nullptr);
}

// A pooled chunk still mapped at a stale range keeps its memory when released; the mapper's
// counts let a trim release only chunks that nothing maps (no unmap, which synchronises).
TEST_F(PartsFixture, VaMapperCountsTheRangesMappingEachChunkForTrimUnmapped) {
  StartParts();
  CUdeviceptr stale = 0, gone = 0;
  ASSERT_CU(vmm_->Reserve(&stale, 3 * kChunk));
  ASSERT_CU(vmm_->Reserve(&gone, kChunk));
  std::vector<std::uint32_t> three, one;
  ASSERT_CU(chunks_->Take(3, compute_, &three));
  ASSERT_CU(chunks_->Take(1, compute_, &one));
  ASSERT_CU(vmm_->Map(stale, three));
  ASSERT_CU(vmm_->Map(gone, one));
  ASSERT_CU(vmm_->Unmap(gone, kChunk));
  for (std::uint32_t c : three) EXPECT_EQ(chunks_->mappings(c), 1u);
  EXPECT_EQ(chunks_->mappings(one[0]), 0u);
  chunks_->Release(three, nullptr, nullptr);  // pooled, still mapped at `stale`
  chunks_->Release(one, nullptr, nullptr);
  EXPECT_EQ(chunks_->TrimUnmapped(kChunk), kChunk);  // the one nothing maps
  EXPECT_EQ(chunks_->created_bytes(), 3 * kChunk);
  EXPECT_EQ(chunks_->TrimUnmapped(UINT64_MAX), 0u);  // the rest still mapped
  EXPECT_EQ(Count(counters_.unmaps), 1u);            // and no unmap was made for it
  ASSERT_CU(vmm_->Unmap(stale, 3 * kChunk));
  EXPECT_EQ(chunks_->TrimUnmapped(2 * kChunk), 2 * kChunk);  // no more than asked (rounded)
  EXPECT_EQ(chunks_->TrimUnmapped(UINT64_MAX), kChunk);
  EXPECT_EQ(chunks_->created_bytes(), 0u);
  vmm_->FreeAddress(stale, 3 * kChunk);
  vmm_->FreeAddress(gone, kChunk);
}

}  // namespace
}  // namespace swap_test
