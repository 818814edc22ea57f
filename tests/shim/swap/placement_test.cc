// Destinations on simgpu with two devices (docs/executor.md, "Destinations"): swapped bytes go to
// the peer GPU an entry names while a lease there has room — on the peer's physical memory,
// bit-identical, with a shorter swap wait in virtual time — and to local host memory otherwise
// (no lease, the lease's bytes reached, the peer out of memory, CHAMELEON_PLACEMENT=host); a
// dropped lease moves the copies back to host memory with no loss and then reports its
// generation; the owner side asks for its lent bytes back when the safety net evicts.
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim_fixture.h"
#include "swap/policy_runner.h"

namespace swap_test {
namespace {

// Every test of this binary runs on a node of two simulated GPUs of 1 GiB each: simgpu reads its
// environment at cuInit, which SetUp calls after static initialisation.
const bool kNodeEnvironment = [] {
  setenv("SIMGPU_DEVICES", "2", 1);
  setenv("SIMGPU_MEMORY", "1GiB", 1);
  return true;
}();

namespace ipc = chameleon::ipc;
using sw::AllocId;
using sw::Placement;
using sw::Residency;

std::uint64_t C(const std::atomic<std::uint64_t>& c) { return c.load(); }

constexpr std::uint32_t kFwd = 10, kBwd = 20;
constexpr std::size_t kBytes = 8 * kMiB;  // a chunk multiple: span == bytes
constexpr Placement kPeer{ipc::Tier::kPeerGpu, 1};

ipc::LeaseGrant Lease(std::uint64_t bytes) {
  ipc::LeaseGrant l{};
  l.lease_id = 7;
  l.bytes = bytes;
  l.helper = 1;
  return l;
}

// Out after fwd#occ, in and use before bwd#occ.
ipc::SwapEntry Entry(ipc::Tier tier, std::uint16_t helper, std::uint32_t occ) {
  ipc::SwapEntry e{};
  e.bytes = kBytes;
  e.out_token = kFwd;
  e.out_occurrence = occ;
  e.in_token = kBwd;
  e.in_occurrence = occ;
  e.use_token = kBwd;
  e.use_occurrence = occ;
  e.tier = static_cast<std::uint16_t>(tier);
  e.helper = helper;
  return e;
}

ipc::Policy MakePolicy(std::uint64_t generation, std::vector<ipc::SwapEntry> entries,
                       std::vector<ipc::LeaseGrant> leases) {
  ipc::Policy p;
  p.summary.generation = generation;
  p.entries = std::move(entries);
  p.leases = std::move(leases);
  return p;
}

class PlacementTest : public SwapFixture {
 protected:
  void Start(sw::PlacementMode mode = sw::PlacementMode::kAuto, std::uint64_t limit = UINT64_MAX) {
    sw::SwapEngineOptions o;
    o.placement = mode;
    o.device_limit_bytes = limit;
    StartEngine(o);
    runner_ = std::make_unique<sw::PolicyRunner>(engine_.get(), &counters_);
    peer0_ = PeerLive();
  }
  /// Physical bytes live on device 1 (the peer) beyond those at Start.
  /// The policy's one entry swapped out to host memory instead of where it asked (one fallback),
  /// then back intact. `peer_untouched`: also check that the peer holds none of it (not where
  /// the test itself filled the peer).
  void ExpectHostFallbackRoundTrip(AllocId id, CUdeviceptr p, std::uint32_t seed,
                                   bool peer_untouched) {
    Boundary();
    Op(kFwd, id);
    ASSERT_EQ(engine_->State(id), Residency::kSwappedOut);
    EXPECT_EQ(C(counters_.peer_out_bytes), 0u);
    EXPECT_EQ(C(counters_.placement_fallbacks), 1u);
    EXPECT_EQ(C(counters_.host_pool_bytes), kBytes);
    if (peer_untouched) {
      EXPECT_EQ(PeerBytes(), 0u);
    }
    Clobber();
    Op(kBwd, id);
    EXPECT_EQ(Mismatches(p, seed), 0u);
  }

  std::uint64_t PeerBytes() { return PeerLive() - peer0_; }
  std::uint64_t PeerLive() {
    std::uint64_t live = 0, peak = 0;
    physical_usage_(1, &live, &peak);
    return live;
  }
  AllocId NewFilled(std::uint32_t seed, CUdeviceptr* p) {
    AllocId id = 0;
    EXPECT_CU(engine_->Allocate(kBytes, compute_, p, &id));
    EXPECT_CU(Fill(*p, kBytes, seed, compute_));
    return id;
  }
  /// One op of `token` whose only tensor is `id`: BeforeOp, the ring append, AfterOp.
  void Op(std::uint32_t token, AllocId id) {
    const sw::OpTensor args[] = {{id, kBytes}};
    runner_->BeforeOp(token, compute_);
    const sw::OccurrenceTicket t = runner_->occurrences().Count(token);
    runner_->AfterOp(token, t, compute_, args);
  }
  void Boundary() {
    runner_->occurrences().NextEpoch();
    runner_->BeginIteration();
  }
  /// Makes the next swap-in a real copy from its destination: once the swap-outs are done, their
  /// chunks are taken and overwritten by another tensor (no reclaim can serve the swap-in).
  void Clobber() {
    ASSERT_CU(ctx_sync_());
    engine_->FlushUnmaps();
    CUdeviceptr q = 0;
    AllocId scratch = 0;
    ASSERT_CU(engine_->Allocate(2 * kBytes, compute_, &q, &scratch));
    ASSERT_CU(Fill(q, 2 * kBytes, 99, compute_));
    ASSERT_CU(engine_->Free(scratch, compute_));
    ASSERT_CU(ctx_sync_());
    engine_->FlushUnmaps();
  }
  std::uint64_t Mismatches(CUdeviceptr p, std::uint32_t seed) {
    EXPECT_CU(Check(p, kBytes, seed, compute_, 0));
    EXPECT_CU(ctx_sync_());
    return results_[0];
  }

  std::unique_ptr<sw::PolicyRunner> runner_;
  std::uint64_t peer0_ = 0;
};

TEST_F(PlacementTest, ALeasedPeerHoldsTheSwappedBytesAndGivesThemBackIdentical) {
  Start();
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(5, &p);
  runner_->SetPolicy(MakePolicy(1, {Entry(ipc::Tier::kPeerGpu, 1, 0)}, {Lease(64 * kMiB)}));
  Boundary();
  EXPECT_EQ(C(counters_.leases_applied_generation), 1u);  // nothing to revoke
  Op(kFwd, id);
  ASSERT_EQ(engine_->State(id), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.peer_out_bytes), kBytes);
  EXPECT_EQ(C(counters_.placement_fallbacks), 0u);
  EXPECT_EQ(C(counters_.host_pool_bytes), 0u);  // not a byte in host memory
  EXPECT_EQ(C(counters_.peer_held_bytes), kBytes);
  EXPECT_EQ(PeerBytes(), kBytes);  // on the peer's own memory, as simgpu counts it
  Clobber();
  Op(kBwd, id);
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(C(counters_.swap_in_bytes), kBytes);  // copied back from the peer, not reclaimed
  EXPECT_EQ(C(counters_.reclaims), 0u);
  EXPECT_EQ(Mismatches(p, 5), 0u);
}

TEST_F(PlacementTest, APeerSwapWaitsLessThanAHostSwapInVirtualTime) {
  Start();
  CUdeviceptr a = 0, b = 0;
  const AllocId ida = NewFilled(1, &a), idb = NewFilled(2, &b);
  // A by host memory at fwd#0/bwd#0, then B by the peer at fwd#1/bwd#1: each swapped in right
  // before its use, so its consumer waits for the whole copy back.
  runner_->SetPolicy(MakePolicy(
      1, {Entry(ipc::Tier::kHost, 0, 0), Entry(ipc::Tier::kPeerGpu, 1, 1)}, {Lease(64 * kMiB)}));
  Boundary();
  Op(kFwd, ida);
  Clobber();
  Op(kBwd, ida);
  const std::uint64_t host_wait = C(counters_.swap_in_wait_ns);
  Op(kFwd, idb);
  Clobber();
  Op(kBwd, idb);
  const std::uint64_t peer_wait = C(counters_.swap_in_wait_ns) - host_wait;
  EXPECT_EQ(C(counters_.peer_out_bytes), kBytes);
  EXPECT_EQ(C(counters_.swap_in_bytes), 2 * kBytes);
  EXPECT_EQ(C(counters_.prefetch_misses), 2u);
  // Each consumer waits for its swap-in copy (Clobber finished the swap-out). simgpu's default
  // machine (A100): 25 GB/s from host memory (~335 us for 8 MiB), 250 GB/s from the peer over
  // NVLink (~34 us). Measured: 334,544 ns and 33,554 ns.
  RecordProperty("host_wait_ns", std::to_string(host_wait));
  RecordProperty("peer_wait_ns", std::to_string(peer_wait));
  EXPECT_GT(peer_wait, 0u);
  EXPECT_LT(5 * peer_wait, host_wait) << "peer " << peer_wait << " ns, host " << host_wait;
  EXPECT_EQ(Mismatches(a, 1), 0u);
  EXPECT_EQ(Mismatches(b, 2), 0u);
}

TEST_F(PlacementTest, APeerWithoutALeaseIsNeverUsed) {
  Start();
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(6, &p);
  runner_->SetPolicy(MakePolicy(1, {Entry(ipc::Tier::kPeerGpu, 1, 0)}, {}));
  ExpectHostFallbackRoundTrip(id, p, 6, /*peer_untouched=*/true);
}

TEST_F(PlacementTest, BytesBeyondTheLeaseGoToHostMemory) {
  Start();
  CUdeviceptr a = 0, b = 0;
  const AllocId ida = NewFilled(1, &a), idb = NewFilled(2, &b);
  // Both out before either comes back; the lease holds one of them.
  runner_->SetPolicy(MakePolicy(
      1, {Entry(ipc::Tier::kPeerGpu, 1, 0), Entry(ipc::Tier::kPeerGpu, 1, 1)}, {Lease(kBytes)}));
  Boundary();
  Op(kFwd, ida);
  Op(kFwd, idb);
  EXPECT_EQ(engine_->State(ida), Residency::kSwappedOut);
  EXPECT_EQ(engine_->State(idb), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.peer_out_bytes), kBytes);
  EXPECT_EQ(C(counters_.placement_fallbacks), 1u);
  EXPECT_EQ(C(counters_.host_pool_bytes), kBytes);
  EXPECT_EQ(PeerBytes(), kBytes);
  Clobber();
  Op(kBwd, ida);
  Op(kBwd, idb);
  EXPECT_EQ(Mismatches(a, 1), 0u);
  EXPECT_EQ(Mismatches(b, 2), 0u);
}

TEST_F(PlacementTest, APeerOutOfMemoryFallsBackToHostMemory) {
  Start();
  // Another process's memory, as far as this one knows: all of device 1 but 4 MiB.
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  CUmemGenericAllocationHandle filler = 0;
  ASSERT_CU(api_.mem_create(&filler, (1u << 30) - 4 * kMiB, &prop, 0));
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(8, &p);
  runner_->SetPolicy(MakePolicy(1, {Entry(ipc::Tier::kPeerGpu, 1, 0)}, {Lease(64 * kMiB)}));
  ExpectHostFallbackRoundTrip(id, p, 8, /*peer_untouched=*/false);  // the filler is on the peer
  EXPECT_CU(api_.mem_release(filler));
}

TEST_F(PlacementTest, PlacementHostKeepsEveryByteInHostMemoryDespiteALease) {
  Start(sw::PlacementMode::kHost);
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(9, &p);
  runner_->SetPolicy(MakePolicy(1, {Entry(ipc::Tier::kPeerGpu, 1, 0)}, {Lease(64 * kMiB)}));
  ExpectHostFallbackRoundTrip(id, p, 9, /*peer_untouched=*/true);
}

TEST_F(PlacementTest, ANumaNodeEntryGoesToPinnedMemoryOnThatNode) {
  Start();
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(10, &p);
  runner_->SetPolicy(MakePolicy(1, {Entry(ipc::Tier::kHostNuma, 0, 0)}, {}));
  Boundary();
  Op(kFwd, id);
  ASSERT_EQ(engine_->State(id), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.numa_out_bytes), kBytes);
  EXPECT_EQ(C(counters_.placement_fallbacks), 0u);
  EXPECT_EQ(C(counters_.host_pool_bytes), 0u);  // not the local pool: a node's own buffer
  EXPECT_EQ(PeerBytes(), 0u);
  Clobber();
  Op(kBwd, id);
  EXPECT_EQ(Mismatches(p, 10), 0u);
}

TEST_F(PlacementTest, ADroppedLeaseMovesTheCopyToHostMemoryWithNoLoss) {
  Start();
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(3, &p);
  const ipc::LeaseGrant lease = Lease(64 * kMiB);
  engine_->ApplyLeases({&lease, 1}, 1);
  ASSERT_CU(engine_->SwapOut(id, compute_, kPeer));
  EXPECT_EQ(C(counters_.peer_held_bytes), kBytes);
  engine_->ApplyLeases({}, 2);  // the lease is gone while the copy lies on the peer
  EXPECT_EQ(C(counters_.evacuated_bytes), kBytes);
  EXPECT_EQ(engine_->State(id), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.host_pool_bytes), kBytes);
  ASSERT_CU(ctx_sync_());
  engine_->SettleLeases();  // the move has read the peer buffer: it can go
  EXPECT_EQ(C(counters_.leases_applied_generation), 2u);
  EXPECT_EQ(C(counters_.peer_held_bytes), 0u);
  EXPECT_EQ(PeerBytes(), 0u);
  Clobber();
  ASSERT_CU(engine_->WaitResident(id, compute_));
  EXPECT_EQ(C(counters_.swap_in_bytes), kBytes);  // from the host copy the move made
  EXPECT_EQ(Mismatches(p, 3), 0u);
}

TEST_F(PlacementTest, ARevocationWaitsForASwapInStillReadingThePeer) {
  Start();
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(4, &p);
  const ipc::LeaseGrant lease = Lease(64 * kMiB);
  engine_->ApplyLeases({&lease, 1}, 1);
  ASSERT_CU(engine_->SwapOut(id, compute_, kPeer));
  Clobber();
  Signal* gate = NewSignal();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(Gate(engine_->side_stream(), gate, /*open_by_test=*/true));
  ASSERT_CU(engine_->SwapIn(id));  // its copy from the peer waits behind the gate
  engine_->ApplyLeases({}, 2);
  // The peer buffer is still to be read: neither freed nor reported as given back.
  EXPECT_EQ(C(counters_.leases_applied_generation), 1u);
  EXPECT_EQ(C(counters_.peer_held_bytes), kBytes);
  EXPECT_EQ(C(counters_.evacuated_bytes), 0u);  // nothing swapped out to move
  Open(gate);
  ASSERT_CU(ctx_sync_());
  engine_->SettleLeases();
  EXPECT_EQ(C(counters_.leases_applied_generation), 2u);
  EXPECT_EQ(C(counters_.peer_held_bytes), 0u);
  EXPECT_EQ(PeerBytes(), 0u);
  ASSERT_CU(engine_->WaitResident(id, compute_));
  EXPECT_EQ(Mismatches(p, 4), 0u);
}

TEST_F(PlacementTest, APolicyDroppingTheLeaseMidRunEndsWithNothingOnThePeer) {
  Start();
  CUdeviceptr p = 0;
  const AllocId id = NewFilled(11, &p);
  // Swapped out at the end of one iteration, back in the next: it lies on the peer across the
  // boundary where generation 2, without the lease, comes in.
  ipc::SwapEntry wraps = Entry(ipc::Tier::kPeerGpu, 1, 0);
  wraps.entry_flags = ipc::kEntryWraps;
  runner_->SetPolicy(MakePolicy(1, {wraps}, {Lease(64 * kMiB)}));
  Boundary();
  Op(kFwd, id);
  ASSERT_EQ(engine_->State(id), Residency::kSwappedOut);
  EXPECT_EQ(PeerBytes(), kBytes);
  Clobber();  // the swap-in must read the bytes from wherever they are
  runner_->SetPolicy(MakePolicy(2, {wraps}, {}));
  Boundary();
  // Generation 2 swaps the same tensor over the same boundary: it stays off the device (the
  // binding is carried over), and the dropped lease moves its bytes from the peer to host memory.
  EXPECT_EQ(C(counters_.carried_bindings), 1u);
  EXPECT_EQ(engine_->State(id), Residency::kSwappedOut);
  ASSERT_CU(ctx_sync_());
  Boundary();  // the revocation completes at a boundary once its copies are done
  EXPECT_EQ(runner_->generation(), 2u);
  EXPECT_EQ(C(counters_.leases_applied_generation), 2u);
  EXPECT_EQ(C(counters_.peer_held_bytes), 0u);
  EXPECT_EQ(PeerBytes(), 0u);
  EXPECT_EQ(C(counters_.evacuated_bytes), kBytes);
  // Generation 2's own trigger brings it back, from host memory, intact.
  Op(kBwd, id);
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(C(counters_.fault_ins), 0u);
  EXPECT_EQ(Mismatches(p, 11), 0u);
  // Under generation 2 the same entry swaps to host memory.
  Op(kFwd, id);
  EXPECT_EQ(C(counters_.peer_out_bytes), kBytes);  // generation 1's only
  EXPECT_EQ(C(counters_.placement_fallbacks), 1u);
  Boundary();
  Op(kBwd, id);
  EXPECT_EQ(Mismatches(p, 11), 0u);
}

TEST_F(PlacementTest, TheOwnerAsksForLentBytesBackWhenTheSafetyNetEvicts) {
  Start(sw::PlacementMode::kAuto, 2 * kBytes);
  CUdeviceptr p = 0;
  NewFilled(1, &p);
  NewFilled(2, &p);
  NewFilled(3, &p);  // evicts: nothing lent, nothing asked
  EXPECT_GE(C(counters_.evictions), 1u);
  EXPECT_EQ(C(counters_.reclaim_request_bytes), 0u);
  engine_->SetLentBytes(64 * kMiB);
  NewFilled(4, &p);  // the shortfall, up to what was lent
  const std::uint64_t asked = C(counters_.reclaim_request_bytes);
  EXPECT_GE(asked, 2 * kMiB);
  EXPECT_LE(asked, kBytes);
  engine_->SetLentBytes(4 * kMiB);  // the daemon answered: a fresh request, capped by the loan
  EXPECT_EQ(C(counters_.reclaim_request_bytes), 0u);
  NewFilled(5, &p);
  EXPECT_EQ(C(counters_.reclaim_request_bytes), std::min<std::uint64_t>(asked, 4 * kMiB));
  EXPECT_CU(ctx_sync_());
}

TEST(PlacementCountersTest, PublishWritesTheNodePlacementGaugesOfSlotSix) {
  sw::SwapCounters c;
  c.peer_held_bytes.store(3 * kMiB);
  c.reclaim_request_bytes.store(5 * kMiB);
  c.leases_applied_generation.store(42);
  auto h = std::make_unique<ipc::SegmentHeader>();
  c.PublishTo(h.get());
  EXPECT_EQ(h->peer_held_bytes.load(), 3 * kMiB);
  EXPECT_EQ(h->reclaim_request_bytes.load(), 5 * kMiB);
  EXPECT_EQ(h->leases_applied_generation.load(), 42u);
}

}  // namespace
}  // namespace swap_test
