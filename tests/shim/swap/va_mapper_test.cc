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
  EXPECT_CU(vmm_->Unmap(va, 2 * kChunk));
  vmm_->FreeAddress(va, 2 * kChunk);
  chunks_->Release(one, nullptr, nullptr);
  chunks_->Release(two, nullptr, nullptr);
}

}  // namespace
}  // namespace swap_test
