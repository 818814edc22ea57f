// SwapEngine on simgpu: data survives swapping bit for bit at the same address, physical memory
// really goes and comes back, ordering is by events, pools are reused and capped, OOM evicts the
// closest size.
#include <cstring>
#include <vector>

#include "sim_fixture.h"

namespace swap_test {
namespace {

using sw::AllocId;
using sw::Residency;

std::uint64_t C(const std::atomic<std::uint64_t>& c) { return c.load(); }

TEST_F(SwapFixture, RoundTripIsBitIdenticalAtTheSameAddress) {
  StartEngine();
  const std::size_t bytes = 5 * kMiB + 12;  // not a chunk multiple: span is 6 MiB
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(bytes, compute_, &p, &id));
  ASSERT_CU(Fill(p, bytes, 3, compute_));
  const std::uint64_t live_before = PhysicalLive();

  ASSERT_CU(engine_->SwapOut(id, compute_));
  EXPECT_EQ(engine_->State(id), Residency::kSwappedOut);
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  EXPECT_FALSE(engine_->UnmapPending(id));
  EXPECT_EQ(engine_->TrimPool(), 6 * kMiB);
  EXPECT_EQ(PhysicalLive(), live_before - 6 * kMiB);  // the device memory really went

  ASSERT_CU(engine_->SwapIn(id));
  ASSERT_CU(engine_->WaitResident(id, other_));
  ASSERT_CU(Check(p, bytes, 3, other_, 0));
  ASSERT_CU(stream_sync_(other_));
  EXPECT_EQ(results_[0], 0u);
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(engine_->Find(p), id);
  EXPECT_EQ(engine_->Find(p + bytes - 1), id);
  EXPECT_EQ(PhysicalLive(), live_before);

  // Byte-level comparison on the host, including the 12-byte tail.
  std::vector<std::uint32_t> host(bytes / 4);
  ASSERT_CU(dtoh_(host.data(), p, host.size() * 4));
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], Pattern(3, i)) << i;
  EXPECT_EQ(C(counters_.swap_out_bytes), bytes);
  EXPECT_EQ(C(counters_.swap_in_bytes), bytes);
}

TEST_F(SwapFixture, SwapInWithUntouchedChunksReclaimsThemWithoutCopy) {
  StartEngine();
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &p, &id));
  ASSERT_CU(Fill(p, 4 * kMiB, 5, compute_));
  ASSERT_CU(engine_->SwapOut(id, compute_));
  const std::uint64_t maps = Calls("cuMemMap");
  ASSERT_CU(engine_->SwapIn(id));
  ASSERT_CU(engine_->WaitResident(id, compute_));
  ASSERT_CU(Check(p, 4 * kMiB, 5, compute_, 0));
  ASSERT_CU(stream_sync_(compute_));
  EXPECT_EQ(results_[0], 0u);
  EXPECT_EQ(C(counters_.reclaims), 1u);
  EXPECT_EQ(C(counters_.swap_in_bytes), 0u);
  EXPECT_EQ(Calls("cuMemMap"), maps);
}

TEST_F(SwapFixture, ConsumerOnAnotherStreamWaitsForTheSwapIn) {
  StartEngine();
  EXPECT_EQ(GatedConsumerMismatches(), 0u);
  EXPECT_EQ(C(counters_.prefetch_misses), 1u);  // the copy was held back when the consumer came
  EXPECT_EQ(C(counters_.prefetch_hits), 0u);
  EXPECT_EQ(C(counters_.forced_unmaps), 0u);
}

TEST_F(SwapFixture, PrefetchCompletedBeforeTheConsumerIsAHit) {
  StartEngine();
  CUdeviceptr p = 0, q = 0;
  AllocId id = 0, other = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  ASSERT_CU(Fill(p, 2 * kMiB, 1, compute_));
  ASSERT_CU(engine_->SwapOut(id, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &q, &other));  // takes A's chunk
  ASSERT_CU(engine_->SwapIn(id));
  ASSERT_CU(ctx_sync_());  // the prefetch finishes before anyone needs it
  ASSERT_CU(engine_->WaitResident(id, compute_));
  EXPECT_EQ(C(counters_.prefetch_hits), 1u);
  EXPECT_EQ(C(counters_.prefetch_misses), 0u);
  ASSERT_CU(Check(p, 2 * kMiB, 1, compute_, 0));
  ASSERT_CU(stream_sync_(compute_));
  EXPECT_EQ(results_[0], 0u);
}

TEST_F(SwapFixture, FaultInIsASynchronousCountedStall) {
  StartEngine();
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  ASSERT_CU(Fill(p, 2 * kMiB, 4, compute_));
  ASSERT_CU(engine_->SwapOut(id, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_CU(engine_->FaultIn(id));
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(C(counters_.fault_ins), 1u);
  EXPECT_GE(C(counters_.stall_count), 1u);
  // Synchronous: the data is there for a stream that never waited on anything.
  ASSERT_CU(Check(p, 2 * kMiB, 4, other_, 0));
  ASSERT_CU(stream_sync_(other_));
  EXPECT_EQ(results_[0], 0u);
}

TEST_F(SwapFixture, ChunkPoolReachesSteadyStateWithoutNewChunks) {
  sw::SwapEngineOptions options;
  options.device_limit_bytes = 12 * kMiB;
  StartEngine(options);
  const std::uint64_t releases = Calls("cuMemRelease");
  CUdeviceptr a = 0, b = 0;
  AllocId ida = 0, idb = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &a, &ida));
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &b, &idb));
  ASSERT_CU(Fill(a, 4 * kMiB, 11, compute_));
  std::uint64_t creates_after_first = 0, host_allocs_after_first = 0;
  for (int iteration = 0; iteration < 6; ++iteration) {
    // One "iteration": A goes out, a temporary lives and dies in its place, A comes back.
    ASSERT_CU(engine_->SwapOut(ida, compute_));
    CUdeviceptr t = 0;
    AllocId idt = 0;
    ASSERT_CU(engine_->Allocate(8 * kMiB, compute_, &t, &idt));
    ASSERT_CU(Fill(t, 8 * kMiB, 50 + iteration, compute_));
    ASSERT_CU(engine_->Free(idt, compute_));
    ASSERT_CU(engine_->WaitResident(ida, compute_));
    ASSERT_CU(Check(a, 4 * kMiB, 11, compute_, iteration));
    ASSERT_CU(ctx_sync_());
    engine_->FlushUnmaps();
    EXPECT_EQ(results_[iteration], 0u) << iteration;
    EXPECT_LE(engine_->chunk_bytes_created(), 12 * kMiB);
    if (iteration == 0) {
      creates_after_first = Calls("cuMemCreate");
      host_allocs_after_first = Calls("cuMemHostAlloc");
    }
  }
  EXPECT_EQ(Calls("cuMemCreate"), creates_after_first);  // steady state: no new chunks
  EXPECT_EQ(Calls("cuMemRelease"), releases);
  EXPECT_EQ(Calls("cuMemHostAlloc"), host_allocs_after_first);
  EXPECT_GE(C(counters_.chunk_reuses), 5u * 6);
  EXPECT_LE(PhysicalPeak(), 12 * kMiB);  // (peak over this process: every test is its own)
  RecordProperty("vmm_calls", std::to_string(C(counters_.vmm_calls)));
  RecordProperty("forced_unmaps", std::to_string(C(counters_.forced_unmaps)));
  RecordProperty("stalls", std::to_string(C(counters_.stall_count)));
  RecordProperty("reclaims", std::to_string(C(counters_.reclaims)));
}

TEST_F(SwapFixture, HostPoolCapIsRespectedAndBuffersAreReused) {
  sw::SwapEngineOptions options;
  options.host_pool_cap_bytes = 4 * kMiB;
  StartEngine(options);
  CUdeviceptr a = 0, b = 0;
  AllocId ida = 0, idb = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &a, &ida));
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &b, &idb));
  ASSERT_CU(engine_->SwapOut(ida, compute_));
  EXPECT_EQ(engine_->SwapOut(idb, compute_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(engine_->State(idb), Residency::kResident);
  EXPECT_EQ(C(counters_.host_pool_full), 1u);
  EXPECT_EQ(C(counters_.host_pool_bytes), 4 * kMiB);
  const std::uint64_t host_allocs = Calls("cuMemHostAlloc");
  ASSERT_CU(engine_->SwapIn(ida));  // its buffer returns to the pool
  ASSERT_CU(engine_->SwapOut(idb, compute_));
  EXPECT_EQ(Calls("cuMemHostAlloc"), host_allocs);
  EXPECT_EQ(C(counters_.host_pool_bytes), 4 * kMiB);
}

TEST_F(SwapFixture, OomEvictsTheResidentAllocationClosestInSize) {
  sw::SwapEngineOptions options;
  options.device_limit_bytes = 16 * kMiB;
  StartEngine(options);
  CUdeviceptr p2 = 0, p4 = 0, p8 = 0, q = 0;
  AllocId id2 = 0, id4 = 0, id8 = 0, idq = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p2, &id2));
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &p4, &id4));
  ASSERT_CU(engine_->Allocate(8 * kMiB, compute_, &p8, &id8));
  ASSERT_CU(Fill(p4, 4 * kMiB, 44, compute_));
  // 2 MiB left under the limit; a 4 MiB request evicts the 4 MiB tensor (|4-4| < |2-4| < |8-4|).
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &q, &idq));
  EXPECT_EQ(C(counters_.evictions), 1u);
  EXPECT_EQ(engine_->State(id4), Residency::kSwappedOut);
  EXPECT_EQ(engine_->State(id2), Residency::kResident);
  EXPECT_EQ(engine_->State(id8), Residency::kResident);
  ASSERT_CU(Fill(q, 4 * kMiB, 45, compute_));  // overwrites chunks the evicted tensor had
  // Bringing it back evicts again (the new 4 MiB one) and the data is intact.
  ASSERT_CU(engine_->WaitResident(id4, compute_));
  EXPECT_EQ(engine_->State(idq), Residency::kSwappedOut);
  ASSERT_CU(Check(p4, 4 * kMiB, 44, compute_, 0));
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(results_[0], 0u);
  EXPECT_LE(PhysicalPeak(), 16 * kMiB);
  EXPECT_LE(engine_->chunk_bytes_created(), 16 * kMiB);
}

TEST_F(SwapFixture, OomWithNothingEvictableFailsCleanly) {
  sw::SwapEngineOptions options;
  options.device_limit_bytes = 4 * kMiB;
  StartEngine(options);
  CUdeviceptr p = 0, q = 0;
  AllocId id = 0, idq = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &p, &id));
  engine_->SetPinned(id, true);  // e.g. IPC-exported
  EXPECT_EQ(engine_->SwapOut(id, compute_), CUDA_ERROR_NOT_PERMITTED);
  EXPECT_EQ(engine_->Allocate(2 * kMiB, compute_, &q, &idq), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(C(counters_.evictions), 0u);
}

TEST_F(SwapFixture, FreeOfASwappedAllocationDropsItsHostCopy) {
  StartEngine();
  CUdeviceptr a = 0, b = 0;
  AllocId ida = 0, idb = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &a, &ida));
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &b, &idb));
  ASSERT_CU(engine_->SwapOut(ida, compute_));
  const std::uint64_t host_allocs = Calls("cuMemHostAlloc");
  const std::uint64_t frees = Calls("cuMemAddressFree");
  ASSERT_CU(engine_->Free(ida, compute_));
  EXPECT_EQ(engine_->Find(a), 0u);
  EXPECT_EQ(engine_->State(ida), Residency::kUnknown);
  EXPECT_EQ(engine_->SwapIn(ida), CUDA_ERROR_NOT_FOUND);  // a stale id finds nothing
  ASSERT_CU(engine_->SwapOut(idb, compute_));             // reuses A's dropped host buffer
  EXPECT_EQ(Calls("cuMemHostAlloc"), host_allocs);
  engine_->FlushUnmaps(/*all=*/true);
  EXPECT_EQ(Calls("cuMemAddressFree"), frees + 1);  // A's VA went back once its copy was done
}

TEST_F(SwapFixture, FreeDuringAnUnwaitedSwapInOrdersTheChunksAfterTheCopy) {
  StartEngine();
  CUdeviceptr a = 0, b = 0, t = 0;
  AllocId ida = 0, idb = 0, idt = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &a, &ida));
  ASSERT_CU(Fill(a, 2 * kMiB, 1, compute_));
  ASSERT_CU(engine_->SwapOut(ida, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &b, &idb));  // A's chunk is taken
  // Hold the side stream, queue A's swap-in behind it, and free A before anyone waited.
  CUstream gate = nullptr;
  CUevent held = nullptr;
  ASSERT_CU(api_.stream_create(&gate, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(api_.event_create(&held, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(Hold(gate));
  ASSERT_CU(api_.event_record(held, gate));
  ASSERT_CU(api_.stream_wait_event(engine_->side_stream(), held, 0));
  ASSERT_CU(engine_->SwapIn(ida));
  ASSERT_CU(engine_->Free(ida, compute_));
  // The next owner of that chunk writes it on another stream; the queued copy must not land after.
  ASSERT_CU(engine_->Allocate(2 * kMiB, other_, &t, &idt));
  ASSERT_CU(Fill(t, 2 * kMiB, 3, other_));
  ASSERT_CU(Check(t, 2 * kMiB, 3, other_, 0, signal_));  // releases the hold (or 1 s passes)
  ASSERT_CU(ctx_sync_());
  ASSERT_CU(Check(t, 2 * kMiB, 3, other_, 1));
  ASSERT_CU(stream_sync_(other_));
  EXPECT_EQ(results_[0], 0u);
  EXPECT_EQ(results_[1], 0u);
}

TEST_F(SwapFixture, ResidencyIsMirroredIntoTheCallersFlagsWord) {
  StartEngine();
  std::atomic<std::uint32_t> flags{1u};  // bit 0 is the shim's own (kNeverSwap): left alone
  CUdeviceptr p = 0, q = 0;
  AllocId id = 0, idq = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id, &flags));
  EXPECT_EQ(flags.load(), 1u);
  ASSERT_CU(engine_->SwapOut(id, compute_));
  EXPECT_EQ(flags.load(), 1u | chameleon::shim::kSwappedOut);
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &q, &idq));  // takes the chunk: a real copy
  // Hold the side stream so the swap-in is observably in flight.
  CUstream gate = nullptr;
  CUevent held = nullptr;
  ASSERT_CU(api_.stream_create(&gate, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(api_.event_create(&held, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(Hold(gate));
  ASSERT_CU(api_.event_record(held, gate));
  ASSERT_CU(api_.stream_wait_event(engine_->side_stream(), held, 0));
  ASSERT_CU(engine_->SwapIn(id));
  EXPECT_EQ(flags.load(), 1u | chameleon::shim::kSwapInFlight);
  {
    std::lock_guard lock(signal_->mu);  // open the hold kernel
    signal_->reader_done = true;
    signal_->cv.notify_all();
  }
  ASSERT_CU(ctx_sync_());
  ASSERT_CU(engine_->WaitResident(id, compute_));  // complete now: a hit, flag cleared
  EXPECT_EQ(flags.load(), 1u);
  EXPECT_EQ(C(counters_.prefetch_hits), 1u);
}

TEST_F(SwapFixture, CountersPublishIntoSegmentSlotFive) {
  StartEngine();
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  ASSERT_CU(engine_->SwapOut(id, compute_));
  ASSERT_CU(engine_->FaultIn(id));
  auto* header = new chameleon::ipc::SegmentHeader{};
  counters_.PublishTo(header);
  EXPECT_EQ(header->swap_out_bytes.load(), 2 * kMiB);
  EXPECT_EQ(header->stall_count.load(), C(counters_.stall_count));
  EXPECT_EQ(header->vmm_calls.load(), C(counters_.vmm_calls));
  EXPECT_GT(header->vmm_calls.load(), 0u);
  EXPECT_EQ(header->host_pool_bytes.load(), 2 * kMiB);
  delete header;
}

}  // namespace
}  // namespace swap_test
