// ResidencyManager on simgpu: a swap-in takes untouched chunks back without a copy (mapped or
// not), copies otherwise, counts prefetch hits and fault-ins, and an op's own tensors are never
// evicted to make room for each other.
#include "parts_fixture.h"

namespace swap_test {
namespace {

TEST_F(PartsFixture, ResidencySwapInReclaimsStillMappedChunksWithoutACopy) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 1);
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  ASSERT_CU(residency_->SwapIn(a));
  EXPECT_EQ(a->state, sw::Residency::kResident);
  EXPECT_EQ(Count(counters_.reclaims), 1u);
  EXPECT_EQ(Count(counters_.swap_in_bytes), 0u);
  EXPECT_EQ(unmaps_->pending(), 0u);  // its deferred unmap was cancelled
  ASSERT_CU(residency_->WaitResident(a, other_));
  ASSERT_CU(Check(a->va, 2 * kChunk, 1, other_, 0));
  ASSERT_CU(stream_sync_(other_));
  EXPECT_EQ(results_[0], 0u);
}

TEST_F(PartsFixture, ResidencySwapInRemapsUnmappedButUntouchedChunks) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 2);
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  ASSERT_CU(ctx_sync_());
  unmaps_->Flush(/*all=*/false);
  ASSERT_FALSE(a->mapped);
  ASSERT_CU(residency_->SwapIn(a));
  EXPECT_EQ(Count(counters_.remap_reclaims), 1u);
  EXPECT_EQ(Count(counters_.swap_in_bytes), 0u);
  ASSERT_CU(residency_->WaitResident(a, compute_));
  EXPECT_EQ(Mismatches(a->va, 2 * kChunk, 2), 0u);
}

TEST_F(PartsFixture, ResidencyCopiesBackReusedChunksAndCountsHitsAndFaultIns) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 3);
  sw::Allocation* b = NewFilled(2 * kChunk, 4);
  for (sw::Allocation* x : {a, b}) ASSERT_CU(transfers_->SwapOut(x, compute_));
  ASSERT_CU(ctx_sync_());
  unmaps_->Flush(/*all=*/false);
  sw::Allocation* c = NewFilled(4 * kChunk, 5);  // takes (and overwrites) all their chunks
  ASSERT_CU(residency_->SwapIn(a));              // a copy now
  EXPECT_EQ(Count(counters_.swap_in_bytes), 2 * kChunk);
  ASSERT_CU(ctx_sync_());
  ASSERT_CU(residency_->WaitResident(a, compute_));
  EXPECT_EQ(Count(counters_.prefetch_hits), 1u);  // the copy was done when its consumer came
  EXPECT_EQ(a->ready, nullptr);
  ASSERT_CU(residency_->FaultIn(b));  // the safety net: back and waited for on the host
  EXPECT_EQ(Count(counters_.fault_ins), 1u);
  EXPECT_GE(Count(counters_.stall_count), 1u);
  EXPECT_EQ(b->ready, nullptr);
  EXPECT_EQ(Mismatches(a->va, 2 * kChunk, 3), 0u);
  EXPECT_EQ(Mismatches(b->va, 2 * kChunk, 4), 0u);
  EXPECT_EQ(Mismatches(c->va, 4 * kChunk, 5), 0u);
}

TEST_F(PartsFixture, ResidencyPrepareUseNeverEvictsAnotherTensorOfTheSameOp) {
  StartParts(/*limit=*/4 * kChunk);
  sw::Allocation* a = NewFilled(2 * kChunk, 1);
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  ASSERT_CU(ctx_sync_());
  unmaps_->Flush(/*all=*/false);
  sw::Allocation* b = NewFilled(2 * kChunk, 2);  // on a's old chunks
  sw::Allocation* c = NewFilled(2 * kChunk, 3);
  const sw::AllocId ab[] = {a->id, b->id};
  ASSERT_CU(residency_->PrepareUse(ab, 2, compute_));
  EXPECT_EQ(a->state, sw::Residency::kResident);
  EXPECT_EQ(b->state, sw::Residency::kResident);
  EXPECT_EQ(c->state, sw::Residency::kSwappedOut);  // the only one the op does not name
  EXPECT_FALSE(a->held || b->held);
  const sw::AllocId abc[] = {a->id, b->id, c->id, 999};  // unknown ids are skipped
  EXPECT_EQ(residency_->PrepareUse(abc, 4, compute_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(a->state, sw::Residency::kResident);
  EXPECT_EQ(b->state, sw::Residency::kResident);
  EXPECT_EQ(Mismatches(a->va, 2 * kChunk, 1), 0u);
}

}  // namespace
}  // namespace swap_test
