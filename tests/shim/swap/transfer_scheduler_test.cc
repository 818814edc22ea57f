// TransferScheduler on simgpu: a swap-out lands bit for bit in its destination buffer and gives
// its chunks back piece by piece, refusals change nothing, and a swap-in copies the contents
// into fresh chunks.
#include "parts_fixture.h"

namespace swap_test {
namespace {

TEST_F(PartsFixture, TransferSchedulerCopiesInFourMiBPieces) {
  StartParts();
  EXPECT_EQ(transfers_->PieceChunks(), 2u);  // 4 MiB of 2 MiB chunks
}

TEST_F(PartsFixture, TransferSchedulerSwapOutFillsTheDestinationAndReleasesTheChunks) {
  StartParts();
  const std::size_t bytes = 5 * kChunk + 12;  // three pieces, the last one partial
  sw::Allocation* a = NewFilled(bytes, 21);
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  EXPECT_EQ(a->state, sw::Residency::kSwappedOut);
  EXPECT_EQ(chunks_->pooled(), 6u);  // released (with their fences) before the copy ends
  EXPECT_TRUE(a->mapped);            // the unmap is deferred
  EXPECT_EQ(unmaps_->pending(), 1u);
  ASSERT_NE(a->host, nullptr);
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(HostMismatches(a->host, bytes, 21), 0u);
  EXPECT_EQ(Count(counters_.swap_out_bytes), bytes);
  EXPECT_CU(transfers_->SwapOut(a, compute_));  // not resident: nothing to do
  EXPECT_EQ(Count(counters_.swap_out_bytes), bytes);
}

TEST_F(PartsFixture, TransferSchedulerRefusalsChangeNothing) {
  StartParts(UINT64_MAX, /*host_cap=*/kChunk);
  sw::Allocation* a = NewFilled(2 * kChunk, 3);
  a->pinned = true;
  EXPECT_EQ(transfers_->SwapOut(a, compute_), CUDA_ERROR_NOT_PERMITTED);
  a->pinned = false;
  EXPECT_EQ(transfers_->SwapOut(a, compute_), CUDA_ERROR_OUT_OF_MEMORY);  // over the host cap
  EXPECT_EQ(Count(counters_.host_pool_full), 1u);
  EXPECT_EQ(a->state, sw::Residency::kResident);
  EXPECT_EQ(chunks_->pooled(), 0u);
  EXPECT_EQ(unmaps_->pending(), 0u);
  EXPECT_EQ(Mismatches(a->va, 2 * kChunk, 3), 0u);
}

TEST_F(PartsFixture, TransferSchedulerSwapInCopiesIntoFreshChunks) {
  StartParts();
  sw::Allocation* a = NewFilled(4 * kChunk, 8);
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  ASSERT_CU(ctx_sync_());
  unmaps_->Flush(/*all=*/false);
  ASSERT_FALSE(a->mapped);
  // Overwrite the old chunks, so that only the copy can bring the contents back.
  sw::Allocation* b = NewFilled(4 * kChunk, 99);
  ASSERT_CU(ctx_sync_());
  std::vector<std::uint32_t> fresh;
  std::vector<sw::Fence*> waits;
  ASSERT_CU(chunks_->Take(4, transfers_->in_stream(), &fresh, &waits));
  ASSERT_CU(vmm_->Map(a->va, fresh));
  a->mapped = true;
  a->chunks = fresh;
  a->epochs.clear();
  ASSERT_CU(transfers_->SwapIn(a, waits));
  EXPECT_EQ(a->state, sw::Residency::kResident);
  EXPECT_EQ(a->host, nullptr);  // back to the destination
  ASSERT_NE(a->ready, nullptr);
  ASSERT_CU(api_.stream_wait_event(compute_, a->ready->event, 0));
  EXPECT_EQ(Mismatches(a->va, 4 * kChunk, 8), 0u);
  EXPECT_EQ(Mismatches(b->va, 4 * kChunk, 99), 0u);
  EXPECT_EQ(Count(counters_.swap_in_bytes), 4 * kChunk);
}

}  // namespace
}  // namespace swap_test
