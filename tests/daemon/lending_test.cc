// Node placement through the daemon with fake clients: one client overflows its 12 MiB GPU, the
// other has room on its 1 GiB one. The overflowing client's policy carries a lease on the other's
// GPU and entries placed there, the owner's limit is lowered by the lease; when the owner asks
// for memory back, the lessee's next policy drops the lease, and once the lessee reports that
// policy applied (or the deadline passes) the owner's limit is restored.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/policy_mailbox.h"
#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kOwnerMemory = 1ull << 30;
constexpr std::uint64_t kOwnerPeak = 100 * kMiB;
constexpr std::uint64_t kLesseeMemory = 12 * kMiB;  // the detailed step peaks above it
const char* const kLesseeGpu = "0000:01:00.0";
const char* const kOwnerGpu = "0000:02:00.0";

class LendingTest : public DaemonTest {
 protected:
  void Configure(DaemonOptions* options) override {
    // As PointerTargetsTest: 256 KiB activations must be swappable.
    options->policy.min_swap_bytes = 64 << 10;
    options->policy.chunk_bytes = 256 << 10;
    options->lending.all_gpus = true;
    options->lending.reserve_bytes = 16 * kMiB;
    options->lending.revoke_deadline_ns = deadline_ns_;
    // NVLink-class peers and one NUMA node: the peer is the nearest helper, whatever this
    // machine's sysfs says (the daemon reads the file at start).
    const std::string topology = dir_ + "/node.yaml";
    std::ofstream(topology) << "peer_link_bandwidth: 3.7e11\nhost_numa_bytes: [64GiB]\n";
    setenv("CHAMELEON_TOPOLOGY", topology.c_str(), 1);
  }
  void TearDown() override {
    DaemonTest::TearDown();
    unsetenv("CHAMELEON_TOPOLOGY");
  }

  /// The owner: one 1 GiB GPU, 100 MiB used at most. The lessee sees both GPUs (its own first),
  /// peers of each other.
  void ConnectBoth() {
    std::string error;
    owner_ = FakeClient::Connect(options_.socket_path, &error, kOwnerMemory, SmallGeometry(),
                                 {FakeClient::Device(0, kOwnerGpu, kOwnerMemory)});
    ASSERT_NE(owner_, nullptr) << error;
    owner_->header()->device_bytes_peak.store(kOwnerPeak);
    lessee_ = FakeClient::Connect(options_.socket_path, &error, kLesseeMemory, SmallGeometry(),
                                  {FakeClient::Device(0, kLesseeGpu, kLesseeMemory, 0b10),
                                   FakeClient::Device(1, kOwnerGpu, kOwnerMemory, 0b01)});
    ASSERT_NE(lessee_, nullptr) << error;
  }

  /// Drives the lessee to its first candidate, as PointerTargetsTest does: steps, the detailed
  /// iteration the daemon asks for, then device-timed intervals.
  void LesseeToCandidate() {
    LoopSpec spec;
    FakeClient& c = *lessee_;
    ASSERT_TRUE(c.Alloc(1, 1 << 20));  // the weights
    PushSteps(c, spec, 0, 6);
    ASSERT_TRUE(WaitFor([&] {
      Beat();
      return c.DetailedRequested();
    }));
    const std::uint64_t g = Describe(c.id())["generation"].get<std::uint64_t>();
    std::uint64_t b = 1;
    ASSERT_TRUE(c.MarkTimed(b++, g, 0, 0));
    PushDetailedStep(c, spec, 6);
    ASSERT_TRUE(c.MarkTimed(b++, g, 0, 0));
    c.header()->detail_done_seq.store(c.header()->detail_request_seq.load());
    PushSteps(c, spec, 7, 8);
    for (int i = 0; i < 3; ++i, ++b) ASSERT_TRUE(c.MarkTimed(b, g, b - 1, 1'000'000));
  }

  void Beat() {
    if (owner_) owner_->Heartbeat();
    if (lessee_) lessee_->Heartbeat();
  }

  /// Waits for a policy in `client`'s mailbox that satisfies `want`; returns it.
  ipc::Policy WaitPolicy(FakeClient& client, const std::function<bool(const ipc::Policy&)>& want) {
    ipc::Policy found;
    auto reader = client.segment().mailbox_reader();
    const bool ok = WaitFor([&] {
      Beat();
      if (reader.Poll() != ipc::ReadResult::kNew) return false;
      ipc::Policy policy;
      if (ipc::DecodePolicy(reader.blob(), &policy) != ipc::BlobError::kOk) return false;
      if (!want(policy)) return false;
      found = std::move(policy);
      return true;
    });
    EXPECT_TRUE(ok) << Control({{"command", "leases"}}).dump(2);
    return found;
  }

  /// The lessee holds a lease: its policy and the owner's.
  void Lend(ipc::Policy* lessee_policy, ipc::Policy* owner_policy) {
    ConnectBoth();
    LesseeToCandidate();
    *lessee_policy = WaitPolicy(*lessee_, [](const ipc::Policy& p) { return !p.leases.empty(); });
    *owner_policy = WaitPolicy(*owner_, [](const ipc::Policy& p) { return p.summary.lent_bytes; });
  }

  /// The `leases` reply's row for `bus`, or null. The lessee's own GPU may have a row too: a round
  /// that ran before its trace showed the overflow saw an owner with nothing to swap.
  nlohmann::json GpuRow(const std::string& bus) {
    const nlohmann::json shown = Control({{"command", "leases"}});
    for (const auto& row : shown["gpus"]) {
      if (row["gpu"] == bus) return row;
    }
    return nullptr;
  }

  double Revocations(const std::string& outcome) {
    const auto leases = Control({{"command", "leases"}});
    return leases["revocations"][outcome].get<double>();
  }

  std::uint64_t deadline_ns_ = 60'000'000'000;  // never reached unless a test lowers it
  std::unique_ptr<FakeClient> owner_, lessee_;
};

TEST_F(LendingTest, OverflowingClientBorrowsAndTheOwnerGetsItsMemoryBack) {
  StartDaemon();
  ipc::Policy lessee, owner;
  ASSERT_NO_FATAL_FAILURE(Lend(&lessee, &owner));
  ASSERT_EQ(lessee.leases.size(), 1u);
  const ipc::LeaseGrant lease = lessee.leases[0];
  EXPECT_EQ(lease.helper, 1) << "the lessee's own ordinal of the owner's GPU";
  std::uint64_t peer = 0, planned = 0;
  for (const ipc::SwapEntry& e : lessee.entries) {
    planned += (e.bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);  // in the shim's 2 MiB chunks
    if (e.tier == static_cast<std::uint16_t>(ipc::Tier::kPeerGpu)) {
      EXPECT_EQ(e.helper, 1);
      peer += e.bytes;
    }
  }
  EXPECT_GT(peer, 0u) << "entries are placed on the lent GPU";
  EXPECT_LE(peer, lease.bytes);
  EXPECT_LE(lease.bytes, planned) << "no more lent than the lessee's swaps take";
  // The owner's limit is lowered by exactly the lease: 1 GiB − what it lends.
  EXPECT_EQ(owner.summary.lent_bytes, lease.bytes);
  EXPECT_EQ(owner.summary.device_limit_bytes, kOwnerMemory - lease.bytes);
  auto shown = Control({{"command", "leases"}});
  ASSERT_EQ(shown["leases"].size(), 1u) << shown.dump(2);
  EXPECT_EQ(shown["leases"][0]["gpu"], kOwnerGpu);
  EXPECT_EQ(shown["leases"][0]["owner"].get<std::uint32_t>(), owner_->id());
  EXPECT_EQ(shown["leases"][0]["lessee"].get<std::uint32_t>(), lessee_->id());
  EXPECT_EQ(shown["leases"][0]["state"], "active");

  // The owner asks for memory back: the lessee's next policy omits the lease, every entry home.
  owner_->header()->reclaim_request_bytes.store(1 * kMiB);
  const ipc::Policy omitting =
      WaitPolicy(*lessee_, [](const ipc::Policy& p) { return p.leases.empty(); });
  for (const ipc::SwapEntry& e : omitting.entries) {
    EXPECT_EQ(e.tier, static_cast<std::uint16_t>(ipc::Tier::kHost));
  }
  EXPECT_FALSE(omitting.entries.empty()) << "the lessee still swaps, to host memory";
  shown = Control({{"command", "leases"}});
  ASSERT_EQ(shown["leases"].size(), 1u);
  EXPECT_EQ(shown["leases"][0]["state"], "revoking");
  EXPECT_EQ(Revocations("completed"), 0);

  // Until the lessee complies the owner stays lowered; then its limit is restored.
  lessee_->header()->leases_applied_generation.store(omitting.summary.generation);
  const ipc::Policy restored =
      WaitPolicy(*owner_, [](const ipc::Policy& p) { return p.summary.lent_bytes == 0; });
  // The full limit again, named: the shim keeps the last limit it was given (0 would keep the
  // lowered one).
  EXPECT_EQ(restored.summary.device_limit_bytes, kOwnerMemory);
  EXPECT_EQ(Revocations("completed"), 1);
  EXPECT_EQ(Revocations("hung"), 0);
  EXPECT_TRUE(Control({{"command", "leases"}})["leases"].empty());
  const std::string metrics = Control({{"command", "metrics"}})["text"];
  EXPECT_NE(metrics.find("chameleon_lease_revocations_total{outcome=\"completed\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("chameleon_placement_bytes{helper=\"gpu 0000:02:00.0\"} " +
                         std::to_string(lease.bytes)),
            std::string::npos)
      << metrics;
}

// The owner's shim runs under the lowered limit and publishes it as the one in force
// (device_limit_bytes), next to its own (own_limit_bytes, layout 1.4): the daemon must plan and
// lend from its own. From the limit in force it would take the lease off a second time (an owner
// limit of 1 GiB − 2 × lease, a spare short by the lease), and again at each republish.
TEST_F(LendingTest, AnOwnerRunningUnderItsLoweredLimitIsNotLoweredAgain) {
  StartDaemon();
  ipc::Policy lessee, owner;
  ASSERT_NO_FATAL_FAILURE(Lend(&lessee, &owner));
  const std::uint64_t lease = owner.summary.lent_bytes;
  ASSERT_GT(lease, 0u);
  ipc::SegmentHeader* h = owner_->header();
  h->own_limit_bytes.store(kOwnerMemory);
  h->device_limit_bytes.store(owner.summary.device_limit_bytes);
  EXPECT_EQ(Describe(owner_->id())["device"]["limit_bytes"].get<std::uint64_t>(),
            kOwnerMemory - lease);
  // A few more rounds see the same owner: its GPU still offers what is left, lease counted once.
  const std::uint64_t spare = kOwnerMemory - kOwnerPeak - 16 * kMiB - lease;
  ASSERT_TRUE(WaitFor([&] {
    Beat();
    const auto row = GpuRow(kOwnerGpu);
    return !row.is_null() && row["spare_bytes"] == spare;
  })) << Control({{"command", "leases"}}).dump(2);
  const auto gpu = GpuRow(kOwnerGpu);
  EXPECT_EQ(gpu["state"], "lending");
  EXPECT_EQ(gpu["lent_bytes"].get<std::uint64_t>(), lease);
  EXPECT_EQ(Describe(owner_->id())["device"]["limit_bytes"].get<std::uint64_t>(),
            kOwnerMemory - lease);
}

// A lease is whole chunks of the lessee's executor (kShimChunkBytes): each swapped copy takes its
// allocation's whole chunks in the peer buffer, so a lease short of a chunk could hold nothing.
TEST_F(LendingTest, ALeaseIsWholeSwapChunks) {
  StartDaemon();
  ipc::Policy lessee, owner;
  ASSERT_NO_FATAL_FAILURE(Lend(&lessee, &owner));
  ASSERT_EQ(lessee.leases.size(), 1u);
  const std::uint64_t chunk = 2 * kMiB;
  EXPECT_EQ(lessee.leases[0].bytes % chunk, 0u) << lessee.leases[0].bytes;
  std::uint64_t peer_spans = 0;
  for (const ipc::SwapEntry& e : lessee.entries) {
    if (e.tier == static_cast<std::uint16_t>(ipc::Tier::kPeerGpu)) {
      peer_spans += (e.bytes + chunk - 1) / chunk * chunk;
    }
  }
  EXPECT_GT(peer_spans, 0u);
  EXPECT_LE(peer_spans, lessee.leases[0].bytes) << "the entries placed there fit as chunks";
}

class HungLesseeTest : public LendingTest {
 protected:
  HungLesseeTest() { deadline_ns_ = 300'000'000; }
};

TEST_F(HungLesseeTest, AnOwnerIsNeverKeptWaitingPastTheDeadline) {
  StartDaemon();
  ipc::Policy lessee, owner;
  ASSERT_NO_FATAL_FAILURE(Lend(&lessee, &owner));
  owner_->header()->reclaim_request_bytes.store(1 * kMiB);
  // The lessee never reports the omitting policy applied.
  const ipc::Policy restored =
      WaitPolicy(*owner_, [](const ipc::Policy& p) { return p.summary.lent_bytes == 0; });
  EXPECT_EQ(restored.summary.device_limit_bytes, kOwnerMemory);
  EXPECT_EQ(Revocations("hung"), 1);
  EXPECT_EQ(Revocations("completed"), 0);
  const std::string metrics = Control({{"command", "metrics"}})["text"];
  EXPECT_NE(metrics.find("chameleon_lease_revocations_total{outcome=\"hung\"} 1"),
            std::string::npos);
  // The GPU lends no more while this owner holds it, and says so.
  EXPECT_NE(metrics.find("chameleon_lending_stopped_gpus 1"), std::string::npos) << metrics;
  const auto gpu = GpuRow(kOwnerGpu);
  ASSERT_FALSE(gpu.is_null()) << Control({{"command", "leases"}}).dump(2);
  EXPECT_EQ(gpu["state"], "stopped");
  EXPECT_EQ(gpu["spare_bytes"].get<std::uint64_t>(), 0u);
}

TEST_F(LendingTest, ALesseeThatLeavesGivesTheOwnerItsLimitBack) {
  StartDaemon();
  ipc::Policy lessee, owner;
  ASSERT_NO_FATAL_FAILURE(Lend(&lessee, &owner));
  lessee_->Disconnect();
  lessee_.reset();
  const ipc::Policy restored =
      WaitPolicy(*owner_, [](const ipc::Policy& p) { return p.summary.lent_bytes == 0; });
  EXPECT_EQ(restored.summary.device_limit_bytes, kOwnerMemory);
  EXPECT_TRUE(Control({{"command", "leases"}})["leases"].empty());
  EXPECT_EQ(Revocations("hung"), 0) << "a dead lessee holds nothing: no revocation to wait for";
}

}  // namespace
}  // namespace chameleon::daemon::testing
