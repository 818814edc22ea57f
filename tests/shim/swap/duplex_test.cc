// SwapEngine ordering across its two side streams (docs/executor.md, "Event ordering"):
// swap-outs and swap-ins run concurrently, and each dependency between them is an event wait.
// Each test holds one stream behind a gate kernel so that a missing wait shows as wrong data
// (or, for the duplex test, as a swap-in that cannot finish while the out stream is held).
#include "sim_fixture.h"

namespace swap_test {
namespace {

using sw::AllocId;

constexpr std::size_t kBytes = 4 * kMiB;

std::uint64_t C(const std::atomic<std::uint64_t>& c) { return c.load(); }

class DuplexTest : public SwapFixture {
 protected:
  // A swapped out and unmapped, its chunks now B's (filled with seed 99): A's swap-in copies.
  void SwapOutAAndGiveItsChunksToB() {
    ASSERT_CU(engine_->Allocate(kBytes, compute_, &a_, &ida_));
    ASSERT_CU(Fill(a_, kBytes, 7, compute_));
    ASSERT_CU(engine_->SwapOut(ida_, compute_));
    ASSERT_CU(ctx_sync_());
    engine_->FlushUnmaps();
    ASSERT_CU(engine_->Allocate(kBytes, compute_, &b_, &idb_));
    ASSERT_CU(Fill(b_, kBytes, 99, compute_));
  }
  // Brings `id` back, checks it against `seed` on other_ (mismatches in results_[slot]).
  void CheckBack(AllocId id, CUdeviceptr p, std::uint32_t seed, int slot) {
    ASSERT_CU(engine_->SwapIn(id));
    ASSERT_CU(engine_->WaitResident(id, other_));
    ASSERT_CU(Check(p, kBytes, seed, other_, slot));
    ASSERT_CU(stream_sync_(other_));
  }

  CUdeviceptr a_ = 0, b_ = 0;
  AllocId ida_ = 0, idb_ = 0;
};

TEST_F(DuplexTest, ASwapInDoesNotWaitBehindAnUnrelatedSwapOut) {
  StartEngine();
  ASSERT_NE(engine_->side_stream(), engine_->out_stream());
  SwapOutAAndGiveItsChunksToB();
  // Free chunks for A's swap-in that do not depend on B's swap-out.
  CUdeviceptr c = 0;
  AllocId idc = 0;
  ASSERT_CU(engine_->Allocate(kBytes, compute_, &c, &idc));
  ASSERT_CU(engine_->Free(idc, compute_));
  Signal* gate = NewSignal();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(Gate(engine_->out_stream(), gate, /*open_by_test=*/true));
  ASSERT_CU(engine_->SwapOut(idb_, compute_));  // held behind the gate
  CUevent out_marker = nullptr;
  ASSERT_CU(api_.event_create(&out_marker, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(api_.event_record(out_marker, engine_->out_stream()));
  // A's swap-in and its consumer complete while the swap-out stream is still held.
  CheckBack(ida_, a_, 7, 0);
  EXPECT_EQ(results_[0], 0u);
  EXPECT_EQ(api_.event_query(out_marker), CUDA_ERROR_NOT_READY);
  Open(gate);
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(api_.event_query(out_marker), CUDA_SUCCESS);
  CheckBack(idb_, b_, 99, 1);
  EXPECT_EQ(results_[1], 0u);
}

TEST_F(DuplexTest, AHostBufferIsNotOverwrittenBeforeItsSwapInCopyReadIt) {
  StartEngine();
  SwapOutAAndGiveItsChunksToB();
  // A's swap-in reads its host buffer on the in stream, held back; B's swap-out then gets the
  // same buffer (same size, just released) and writes it on the out stream. Without the out
  // stream's wait on the buffer's fence, B's data lands in the buffer first and A reads it.
  ASSERT_CU(Gate(engine_->side_stream(), signal_, /*open_by_test=*/false));
  ASSERT_CU(engine_->SwapIn(ida_));
  const std::uint64_t allocations = Calls("cuMemHostAlloc");
  ASSERT_CU(engine_->SwapOut(idb_, compute_));
  EXPECT_EQ(Calls("cuMemHostAlloc"), allocations);       // it did reuse A's buffer
  ASSERT_CU(Notify(engine_->out_stream(), signal_, 2));  // opens the gate once B's copy ran
  ASSERT_CU(engine_->WaitResident(ida_, other_));
  ASSERT_CU(Check(a_, kBytes, 7, other_, 0));
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(results_[0], 0u);
  CheckBack(idb_, b_, 99, 1);
  EXPECT_EQ(results_[1], 0u);
}

TEST_F(DuplexTest, ASwapOutDuringItsOwnUnwaitedSwapInCopiesTheSwappedInData) {
  StartEngine();
  SwapOutAAndGiveItsChunksToB();
  // A's swap-in is held on the in stream; A is swapped out again before anyone waited. The copy
  // out must read what the swap-in wrote, not the fresh chunks' previous contents.
  ASSERT_CU(Gate(engine_->side_stream(), signal_, /*open_by_test=*/false));
  ASSERT_CU(engine_->SwapIn(ida_));
  ASSERT_CU(engine_->SwapOut(ida_, compute_));
  ASSERT_CU(Notify(engine_->out_stream(), signal_, 2));  // opens the gate once A's copy ran
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  CUdeviceptr d = 0;
  AllocId idd = 0;
  ASSERT_CU(engine_->Allocate(kBytes, compute_, &d, &idd));  // takes A's chunks: A must copy
  ASSERT_CU(Fill(d, kBytes, 55, compute_));
  CheckBack(ida_, a_, 7, 0);
  EXPECT_EQ(results_[0], 0u);
  EXPECT_EQ(C(counters_.swap_in_bytes), 2 * kBytes);
}

// An unmap synchronises the device: a flush while a swap copy is in flight would make the host
// wait for it (at a step's end, the whole swap-out backlog the next forward could overlap). The
// flush waits for a moment when no copy runs; the ranges stay pending meanwhile, data intact.
TEST_F(DuplexTest, AFlushWaitsWhileASwapCopyIsInFlight) {
  StartEngine();
  ASSERT_CU(engine_->Allocate(kBytes, compute_, &a_, &ida_));
  ASSERT_CU(Fill(a_, kBytes, 7, compute_));
  ASSERT_CU(engine_->SwapOut(ida_, compute_));
  ASSERT_CU(ctx_sync_());  // A's copy is complete: its unmap is due
  ASSERT_CU(engine_->Allocate(kBytes, compute_, &b_, &idb_));
  ASSERT_CU(Fill(b_, kBytes, 99, compute_));
  Signal* gate = NewSignal();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(Gate(engine_->out_stream(), gate, /*open_by_test=*/true));
  ASSERT_CU(engine_->SwapOut(idb_, compute_));  // held behind the gate
  const std::uint64_t syncs = C(counters_.device_syncs);
  const std::uint64_t unmaps = C(counters_.unmaps);
  engine_->FlushUnmaps();
  EXPECT_EQ(C(counters_.unmaps), unmaps);  // B's copy is in flight: nothing unmapped
  EXPECT_EQ(C(counters_.device_syncs), syncs);
  Open(gate);
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  EXPECT_EQ(C(counters_.unmaps), unmaps + 2);  // A's and B's ranges, one synchronisation
  EXPECT_EQ(C(counters_.device_syncs), syncs + 1);
  CheckBack(ida_, a_, 7, 0);
  CheckBack(idb_, b_, 99, 1);
  EXPECT_EQ(results_[0], 0u);
  EXPECT_EQ(results_[1], 0u);
}

TEST_F(DuplexTest, AStaleRangeUnmapTakesEveryCompletedPendingRangeWithIt) {
  StartEngine();
  // Three tensors swapped out; their chunks all reused by others.
  CUdeviceptr p[3] = {}, q[3] = {};
  AllocId id[3] = {}, idq[3] = {};
  for (int i = 0; i < 3; ++i) {
    ASSERT_CU(engine_->Allocate(kBytes, compute_, &p[i], &id[i]));
    ASSERT_CU(Fill(p[i], kBytes, 10 + i, compute_));
    ASSERT_CU(engine_->SwapOut(id[i], compute_));
  }
  engine_->SetDeviceLimit(3 * kBytes);  // the next allocations must take the released chunks
  for (int i = 0; i < 3; ++i) ASSERT_CU(engine_->Allocate(kBytes, compute_, &q[i], &idq[i]));
  for (int i = 0; i < 3; ++i) ASSERT_CU(engine_->Free(idq[i], compute_));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(engine_->UnmapPending(id[i]));
  // The first swap-in must unmap its stale range (one device synchronisation); the others'
  // ranges go in the same batch, so their swap-ins need no unmap of their own.
  for (int i = 0; i < 3; ++i) CheckBack(id[i], p[i], 10 + i, i);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(results_[i], 0u) << i;
  EXPECT_EQ(C(counters_.forced_unmaps), 1u);
  EXPECT_EQ(C(counters_.device_syncs), 1u);
}

TEST_F(DuplexTest, ASwapInIntoAnEvictedTensorsChunksWaitsForEachPieceOfItsCopyOut) {
  StartEngine();
  constexpr std::size_t kBig = 8 * kMiB;  // two pieces
  CUdeviceptr a = 0, b = 0;
  AllocId ida = 0, idb = 0;
  ASSERT_CU(engine_->Allocate(kBig, compute_, &a, &ida));
  ASSERT_CU(Fill(a, kBig, 7, compute_));
  ASSERT_CU(engine_->SwapOut(ida, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_CU(engine_->Allocate(kBig, compute_, &b, &idb));  // A's chunks
  ASSERT_CU(Fill(b, kBig, 99, compute_));
  engine_->SetDeviceLimit(kBig);  // A's swap-in must evict B and fill B's chunks
  // B's copy out is held; A's copy in, on the other stream, must wait for each piece of it.
  ASSERT_CU(Gate(engine_->out_stream(), signal_, /*open_by_test=*/false));
  ASSERT_CU(engine_->SwapIn(ida));
  EXPECT_EQ(C(counters_.evictions), 1u);
  ASSERT_CU(Notify(engine_->side_stream(), signal_, 2));  // opens the gate once A's copy ran
  ASSERT_CU(engine_->WaitResident(ida, other_));
  ASSERT_CU(Check(a, kBig, 7, other_, 0));
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(results_[0], 0u);
  ASSERT_CU(engine_->WaitResident(idb, other_));  // evicts A in turn
  ASSERT_CU(Check(b, kBig, 99, other_, 1));
  ASSERT_CU(stream_sync_(other_));
  EXPECT_EQ(results_[1], 0u);  // B's host copy was taken before A's data landed
}

TEST_F(DuplexTest, AFreedRangeIsReusedWholeAfterTheFreeInStreamOrder) {
  StartEngine();
  CUdeviceptr a = 0, b = 0;
  AllocId ida = 0, idb = 0;
  ASSERT_CU(engine_->Allocate(kBytes, compute_, &a, &ida));
  // The last write to A is still queued on compute when A is freed there.
  ASSERT_CU(Gate(compute_, signal_, /*open_by_test=*/false));
  ASSERT_CU(Fill(a, kBytes, 1, compute_));
  ASSERT_CU(engine_->Free(ida, compute_));
  const std::uint64_t maps = Calls("cuMemMap"), reserves = Calls("cuMemAddressReserve");
  ASSERT_CU(engine_->Allocate(kBytes, other_, &b, &idb));
  EXPECT_EQ(b, a);  // the same range, still mapped to the same chunks: no driver call
  EXPECT_EQ(Calls("cuMemMap"), maps);
  EXPECT_EQ(Calls("cuMemAddressReserve"), reserves);
  EXPECT_EQ(C(counters_.range_reuses), 1u);
  // B's first use on another stream runs after the free (the gate times out): not before A's
  // queued fill, which would then overwrite it.
  ASSERT_CU(Fill(b, kBytes, 2, other_));
  ASSERT_CU(Notify(other_, signal_, 2));  // opens the gate once B's fill ran
  ASSERT_CU(ctx_sync_());
  ASSERT_CU(Check(b, kBytes, 2, other_, 0));
  ASSERT_CU(stream_sync_(other_));
  EXPECT_EQ(results_[0], 0u);
}

}  // namespace
}  // namespace swap_test
