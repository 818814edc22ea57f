// Allocator on simgpu: chunk-rounded allocations, a free followed by an allocation of the same
// span served by the same range with no VMM call, a swapped-out allocation freed before its
// unmap, and a failed allocation that leaves nothing behind.
#include "parts_fixture.h"

namespace swap_test {
namespace {

TEST_F(PartsFixture, AllocatorRoundsToChunksAndReusesAFreedRangeWithoutVmmCalls) {
  StartParts();
  CUdeviceptr p = 0;
  sw::AllocId id = 0;
  ASSERT_CU(allocator_->Allocate(kChunk + 1, compute_, &p, &id, nullptr));
  ASSERT_NE(table_.Get(id), nullptr);
  EXPECT_EQ(table_.Get(id)->span, 2 * kChunk);
  EXPECT_EQ(table_.Find(p + 2 * kChunk - 1), id);
  ASSERT_CU(allocator_->Free(id, compute_));
  EXPECT_EQ(table_.Get(id), nullptr);
  EXPECT_EQ(table_.Find(p), 0u);
  const std::uint64_t vmm = Count(counters_.vmm_calls);
  CUdeviceptr q = 0;
  sw::AllocId id2 = 0;
  ASSERT_CU(allocator_->Allocate(2 * kChunk, other_, &q, &id2, nullptr));
  EXPECT_EQ(q, p);
  EXPECT_NE(id2, id);
  EXPECT_EQ(Count(counters_.vmm_calls), vmm);
  EXPECT_EQ(Count(counters_.range_reuses), 1u);
  EXPECT_EQ(allocator_->Free(id, compute_), CUDA_ERROR_NOT_FOUND);  // a stale id
}

TEST_F(PartsFixture, AllocatorFreeOfASwappedOutAllocationReleasesTheVaAfterItsUnmap) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 5);
  const sw::AllocId id = a->id;
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  const std::uint64_t reserves = Count(counters_.vmm_reserves);
  ASSERT_CU(allocator_->Free(id, compute_));
  EXPECT_EQ(table_.Get(id), nullptr);
  EXPECT_EQ(Count(counters_.vmm_reserves), reserves);  // not yet: the copy may still read it
  EXPECT_EQ(host_->held_bytes(), 2 * kChunk);          // the buffer is cached, not leaked
  unmaps_->Flush(/*all=*/true);
  EXPECT_EQ(Count(counters_.vmm_reserves), reserves + 1);
  EXPECT_EQ(unmaps_->pending(), 0u);
}

TEST_F(PartsFixture, AllocatorLeavesNothingBehindWhenChunksDoNotFit) {
  StartParts(/*limit=*/kChunk);
  CUdeviceptr p = 0;
  sw::AllocId id = 0;
  EXPECT_EQ(allocator_->Allocate(2 * kChunk, compute_, &p, &id, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(table_.size(), 0u);
  EXPECT_EQ(Count(counters_.vmm_reserves), 2u);  // the reservation was given back
  EXPECT_EQ(chunks_->created_bytes(), 0u);
}

}  // namespace
}  // namespace swap_test
