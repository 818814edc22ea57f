// Evictor on simgpu: the closest-size rule (skipping pinned, held, swapped-out and the requester;
// ties to the oldest), the Belady rule over a recorded iteration, eviction when chunks run out,
// and room made for outside allocations.
#include <atomic>

#include "parts_fixture.h"
#include "swap/use_history.h"

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

// Room for a few outside bytes comes from pooled chunks nothing maps, with no unmap: a freed
// range that is still cached (mapped, intact) stays reusable whole. Only when those fall short
// are stale and cached ranges unmapped (one device synchronisation).
TEST_F(PartsFixture, EvictorTrimsChunksNothingMapsBeforeUnmappingAnyRange) {
  StartParts(/*limit=*/4 * kChunk);
  sw::Allocation* x = NewFilled(2 * kChunk, 1);
  const CUdeviceptr x_va = x->va;
  std::vector<std::uint32_t> loose;
  ASSERT_CU(chunks_->Take(2, compute_, &loose));  // created, never mapped
  chunks_->Release(loose, nullptr, nullptr);
  ASSERT_CU(allocator_->Free(x->id, compute_));  // cached, still mapped to its chunks
  ASSERT_EQ(free_ranges_->mapped(), 1u);
  EXPECT_TRUE(evictor_->MakeRoom(2 * kChunk));
  EXPECT_EQ(Count(counters_.unmaps), 0u);
  EXPECT_EQ(Count(counters_.device_syncs), 0u);
  EXPECT_EQ(free_ranges_->mapped(), 1u);
  EXPECT_EQ(chunks_->created_bytes(), 2 * kChunk);
  sw::Allocation* again = NewFilled(2 * kChunk, 2);  // the cached range, taken back whole
  EXPECT_EQ(again->va, x_va);
  EXPECT_EQ(Count(counters_.range_reuses), 1u);
  ASSERT_CU(allocator_->Free(again->id, compute_));
  EXPECT_CU(ctx_sync_());
  EXPECT_TRUE(evictor_->MakeRoom(4 * kChunk));  // now the cached range must go
  EXPECT_EQ(Count(counters_.unmaps), 1u);
  EXPECT_EQ(chunks_->created_bytes(), 0u);
}

// Room for a few outside bytes once the cached ranges had to be unmapped: only those bytes go
// back to the driver, the rest of the pool stays for the next allocations (releasing every idle
// chunk here made a whole iteration's chunks be created again).
TEST_F(PartsFixture, EvictorReleasesOnlyTheRoomAskedForAfterUnmappingCachedRanges) {
  StartParts(/*limit=*/8 * kChunk);
  sw::Allocation* x = NewFilled(3 * kChunk, 1);
  sw::Allocation* y = NewFilled(3 * kChunk, 2);
  ASSERT_CU(allocator_->Free(x->id, compute_));  // cached, still mapped to their chunks
  ASSERT_CU(allocator_->Free(y->id, compute_));
  ASSERT_CU(ctx_sync_());
  ASSERT_EQ(chunks_->created_bytes(), 6 * kChunk);
  EXPECT_TRUE(evictor_->MakeRoom(3 * kChunk));  // 2 chunks free: one more must go
  EXPECT_EQ(chunks_->created_bytes(), 5 * kChunk);
  EXPECT_EQ(Count(counters_.evictions), 0u);
  EXPECT_TRUE(evictor_->ReleaseBytes(2 * kChunk));
  EXPECT_EQ(chunks_->created_bytes(), 3 * kChunk);
}

// Belady over a hand-made recorded iteration of 8 ops (the previous one; ids 1-4 are long-lived):
//   op: 0  1  2  3  4  5  6  7
//       a  b  c  b  d  .  a  c
TEST_F(PartsFixture, BeladyEvictsTheAllocationWhoseNextUseIsFarthest) {
  StartParts(/*limit=*/7 * kChunk);
  sw::Allocation* a = NewFilled(2 * kChunk, 1);
  sw::Allocation* b = NewFilled(2 * kChunk, 2);
  sw::Allocation* c = NewFilled(2 * kChunk, 3);
  sw::Allocation* d = NewFilled(1 * kChunk, 4);
  sw::UseHistory history;
  std::atomic<std::uint32_t> now{0};
  history.Close(0, table_.next_id());  // the boundary before the recorded iteration
  const sw::AllocId seq[] = {a->id, b->id, c->id, b->id, d->id, 0, a->id, c->id};
  for (std::uint32_t op = 0; op < 8; ++op) {
    if (seq[op] != 0) history.Record(op, &seq[op], 1);
  }
  history.Close(8, table_.next_id());
  ASSERT_TRUE(history.known());
  // Without the history: the closest-size rule (a, b, c are exact; the oldest is a).
  EXPECT_EQ(evictor_->Pick(2 * kChunk, 0), a);
  evictor_->UseBelady(&history, &now);
  now = 3;  // next uses: a 6, b 9 (op 1 of the next iteration), c 7, d 4
  EXPECT_EQ(evictor_->Pick(2 * kChunk, 0), b);
  EXPECT_EQ(evictor_->PickClosest(2 * kChunk, 0), a);  // the paper's rule, still available
  std::vector<std::uint32_t> got;
  ASSERT_CU(evictor_->TakeChunks(2, other_, 0, &got));  // 7 chunks in use: one eviction
  EXPECT_EQ(b->state, sw::Residency::kSwappedOut);
  EXPECT_EQ(a->state, sw::Residency::kResident);
  EXPECT_EQ(Count(counters_.evictions), 1u);
  now = 5;  // a 6, c 7, d 12 (op 4 of the next iteration): d, although its size is further off
  EXPECT_EQ(evictor_->Pick(2 * kChunk, 0), d);
  d->held = true;  // held by the op being prepared: never the victim
  EXPECT_EQ(evictor_->Pick(2 * kChunk, 0), c);
  EXPECT_EQ(evictor_->Pick(2 * kChunk, c->id), a);  // nor the requester
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(HostMismatches(b->host, 2 * kChunk, 2), 0u);
  chunks_->Release(got, nullptr, nullptr);
}

}  // namespace
}  // namespace swap_test
