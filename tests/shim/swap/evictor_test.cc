// Evictor on simgpu: the closest-size rule (skipping pinned, held, swapped-out and the requester;
// ties to the oldest), eviction when chunks run out, and room made for outside allocations.
#include "parts_fixture.h"

namespace swap_test {
namespace {

TEST_F(PartsFixture, EvictorPicksTheResidentAllocationClosestInSize) {
  StartParts();
  sw::Allocation* small = NewFilled(1 * kChunk, 1);
  sw::Allocation* mid = NewFilled(3 * kChunk, 2);
  sw::Allocation* mid2 = NewFilled(3 * kChunk, 3);
  sw::Allocation* big = NewFilled(5 * kChunk, 4);
  EXPECT_EQ(evictor_->PickClosest(4 * kChunk, 0), mid);  // mid, mid2, big all 1 off: the oldest
  EXPECT_EQ(evictor_->PickClosest(3 * kChunk, mid->id), mid2);  // the requester is never picked
  mid->pinned = true;
  mid2->held = true;
  EXPECT_EQ(evictor_->PickClosest(3 * kChunk, 0), small);  // small and big 2 off: the oldest
  ASSERT_CU(transfers_->SwapOut(small, compute_));
  EXPECT_EQ(evictor_->PickClosest(3 * kChunk, 0), big);  // swapped out: not a candidate
  big->pinned = true;
  EXPECT_EQ(evictor_->PickClosest(3 * kChunk, 0), nullptr);
  EXPECT_FALSE(evictor_->EvictClosest(3 * kChunk, 0));
  EXPECT_EQ(Count(counters_.evictions), 0u);
}

TEST_F(PartsFixture, EvictorTakesChunksByEvictingWhenTheLimitIsReached) {
  StartParts(/*limit=*/4 * kChunk);
  sw::Allocation* a = NewFilled(1 * kChunk, 1);
  sw::Allocation* b = NewFilled(3 * kChunk, 2);
  std::vector<std::uint32_t> got;
  ASSERT_CU(evictor_->TakeChunks(3, other_, 0, &got));
  EXPECT_EQ(b->state, sw::Residency::kSwappedOut);  // closest to 3 chunks
  EXPECT_EQ(a->state, sw::Residency::kResident);
  EXPECT_EQ(Count(counters_.evictions), 1u);
  EXPECT_EQ(chunks_->created_bytes(), 4 * kChunk);  // never above the limit
  std::vector<std::uint32_t> more;
  EXPECT_EQ(evictor_->TakeChunks(2, other_, a->id, &more), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(a->state, sw::Residency::kResident);  // the requester itself stays
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(HostMismatches(b->host, 3 * kChunk, 2), 0u);  // its contents were saved first
  chunks_->Release(got, nullptr, nullptr);
}

TEST_F(PartsFixture, EvictorMakesRoomForOutsideBytesByEvictingAndDraining) {
  StartParts(/*limit=*/4 * kChunk);
  sw::Allocation* a = NewFilled(2 * kChunk, 1);
  sw::Allocation* b = NewFilled(2 * kChunk, 2);
  EXPECT_TRUE(evictor_->MakeRoom(0));
  EXPECT_TRUE(evictor_->MakeRoom(2 * kChunk));  // one of them goes to the host
  EXPECT_NE(a->state == sw::Residency::kSwappedOut, b->state == sw::Residency::kSwappedOut);
  EXPECT_EQ(chunks_->created_bytes(), 2 * kChunk);  // its chunks went back to the driver
  EXPECT_GE(Count(counters_.stall_count), 1u);      // the drain waited on the host
  a->pinned = b->pinned = true;
  EXPECT_FALSE(evictor_->MakeRoom(4 * kChunk));  // nothing left to evict
}

}  // namespace
}  // namespace swap_test
