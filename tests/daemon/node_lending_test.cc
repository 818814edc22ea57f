// NodeLending's rules without a daemon: who may lend and borrow, what a policy carries, the
// order of republishing. Client views are built by hand; the node is built from their device
// facts and a CHAMELEON_TOPOLOGY-style override (NVLink peers, one NUMA node).
#include "chameleon/daemon/node_lending.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "device_facts.h"

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

ipc::DeviceFacts Device(std::int32_t ordinal, const char* bus, std::uint64_t memory,
                        std::uint64_t peer_mask) {
  return MakeDeviceFacts(ordinal, bus, memory, peer_mask);
}

/// An undecorated policy of `count` entries of `bytes` each.
ipc::Policy PolicyOf(int count, std::uint64_t bytes) {
  ipc::Policy p;
  for (int i = 0; i < count; ++i) {
    ipc::SwapEntry e{};
    e.bytes = bytes;
    p.entries.push_back(e);
  }
  return p;
}

class NodeLendingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.all_gpus = true;
    options_.reserve_bytes = 1 * kGiB;
    // Owner: 16 GiB GPU, peak 4 GiB: 11 GiB spare. Lessee: sees both (its own first), needs 2 GiB.
    owner_.id = 1;
    owner_.uid = 1000;
    owner_.devices = {Device(0, "0000:02:00.0", 16 * kGiB, 0)};
    owner_.limit_bytes = 16 * kGiB;
    owner_.peak_bytes = 4 * kGiB;
    lessee_.id = 2;
    lessee_.uid = 1001;
    // Its ordinal 1 is the owner's GPU: the lease must name 1, not the owner's 0.
    lessee_.devices = {Device(0, "0000:01:00.0", 8 * kGiB, 0b10),
                       Device(1, "0000:02:00.0", 16 * kGiB, 0b01)};
    lessee_.limit_bytes = 8 * kGiB;
    lessee_.peak_bytes = 8 * kGiB;
    lessee_.demand_bytes = 2 * kGiB;
    lessee_.iteration_s = 1.0;
    lessee_.window_s = 0.5;
  }

  std::vector<std::uint32_t> Round() { return node_.Round(1'000, {owner_, lessee_}, options_); }

  /// A policy of four 512 MiB entries, decorated for the lessee.
  ipc::Policy LesseePolicy() {
    ipc::Policy p = PolicyOf(4, 512 * kMiB);
    node_.Decorate(lessee_.id, lessee_.devices, lessee_.limit_bytes, &p);
    return p;
  }

  prometheus::Registry registry_;
  LendingMetrics metrics_{registry_};
  // NVLink-class peers (3.7e11 B/s, faster than the 2.5e10 host link) and one 64 GiB NUMA node,
  // whatever this machine's sysfs says.
  NodeLending node_{&metrics_, "peer_link_bandwidth: 3.7e11\nhost_numa_bytes: [64GiB]\n"};
  LendingOptions options_;
  NodeClient owner_, lessee_;
};

TEST_F(NodeLendingTest, ShouldLeaseThePeerAndRepublishTheOwnerFirst) {
  EXPECT_EQ(Round(), (std::vector<std::uint32_t>{owner_.id, lessee_.id}));
  ASSERT_EQ(node_.book().Active(lessee_.id).size(), 1u);
  const Lease lease = node_.book().Active(lessee_.id)[0];
  EXPECT_EQ(lease.gpu, "0000:02:00.0");
  EXPECT_LE(lease.bytes, 2 * kGiB);
  EXPECT_EQ(node_.LentBy(owner_.id), lease.bytes);
  const ipc::Policy p = LesseePolicy();
  ASSERT_EQ(p.leases.size(), 1u);
  EXPECT_EQ(p.leases[0].helper, 1);
  EXPECT_EQ(p.leases[0].bytes, lease.bytes);
  std::uint64_t on_peer = 0;
  for (const ipc::SwapEntry& e : p.entries) {
    if (e.tier == static_cast<std::uint16_t>(ipc::Tier::kPeerGpu)) on_peer += e.bytes;
  }
  EXPECT_EQ(on_peer, lease.bytes / (512 * kMiB) * (512 * kMiB)) << "whole entries, in order";
  ipc::Policy owner;
  node_.Decorate(owner_.id, owner_.devices, 16 * kGiB - lease.bytes, &owner);
  EXPECT_EQ(owner.summary.lent_bytes, lease.bytes);
  EXPECT_EQ(owner.summary.device_limit_bytes, 16 * kGiB - lease.bytes);
  // The same inputs again: nothing new to place, nobody to republish.
  EXPECT_TRUE(Round().empty());
}

// The lessee's shim holds each swapped copy in whole chunks (2 MiB): a lease is whole chunks,
// within the spare, and entries are placed on it by the chunks they take, not their bytes.
TEST_F(NodeLendingTest, ShouldLendWholeChunksAndPlaceEntriesByTheirChunks) {
  options_.reserve_bytes = 0;
  owner_.limit_bytes = 4 * kGiB;
  owner_.peak_bytes = 4 * kGiB - 64 * kMiB - 3 * kMiB / 2;  // spare: 65.5 MiB
  lessee_.demand_bytes = 1 * kGiB;                          // more than the spare
  Round();
  ASSERT_EQ(node_.book().Active(lessee_.id).size(), 1u);
  const Lease lease = node_.book().Active(lessee_.id)[0];
  EXPECT_EQ(lease.bytes, 64 * kMiB) << "the spare's whole chunks, not its 65.5 MiB";
  ipc::Policy p = PolicyOf(40, 64 << 10);  // 64 KiB: each takes a whole chunk on the peer
  node_.Decorate(lessee_.id, lessee_.devices, lessee_.limit_bytes, &p);
  int on_peer = 0;
  for (const ipc::SwapEntry& e : p.entries) {
    on_peer += e.tier == static_cast<std::uint16_t>(ipc::Tier::kPeerGpu) ? 1 : 0;
  }
  EXPECT_EQ(on_peer, 32) << "32 chunks of 2 MiB in a 64 MiB lease";
}

TEST_F(NodeLendingTest, ShouldLendOnlyOptedInGpusOfAllowedUids) {
  options_.all_gpus = false;
  options_.gpus = {"0000:03:00.0"};
  Round();
  EXPECT_TRUE(node_.book().leases().empty()) << "the owner's GPU is not opted in";
  options_.gpus = {"0000:02:00.0"};
  options_.lenders = UidRule{false, {0}};
  Round();
  EXPECT_TRUE(node_.book().leases().empty()) << "the owner's uid may not lend";
  options_.lenders = UidRule{};
  options_.borrowers = UidRule{false, {1000}};
  Round();
  EXPECT_TRUE(node_.book().leases().empty()) << "the lessee's uid may not borrow";
  options_.borrowers = UidRule{};
  Round();
  EXPECT_EQ(node_.book().leases().size(), 1u);
}

TEST_F(NodeLendingTest, ShouldNotLendToAClientThatCannotSeeTheGpu) {
  lessee_.devices.pop_back();  // CUDA_VISIBLE_DEVICES hides the owner's GPU from it
  Round();
  EXPECT_TRUE(node_.book().leases().empty());
  EXPECT_TRUE(LesseePolicy().leases.empty());
}

TEST_F(NodeLendingTest, ShouldNotLendAGpuTwoClientsRunOn) {
  NodeClient second = owner_;
  second.id = 3;
  node_.Round(1'000, {owner_, second, lessee_}, options_);
  EXPECT_TRUE(node_.book().leases().empty());
}

TEST_F(NodeLendingTest, ShouldRevokeWhenTheOwnerAsksAndRestoreItAfterTheLesseeComplies) {
  Round();
  ASSERT_EQ(node_.book().leases().size(), 1u);
  owner_.reclaim_request_bytes = 1 * kGiB;
  EXPECT_EQ(Round(), std::vector<std::uint32_t>{lessee_.id}) << "the lessee's policy changes";
  EXPECT_TRUE(LesseePolicy().leases.empty());
  node_.Published(lessee_.id, 42);
  lessee_.leases_applied_generation = 41;
  EXPECT_TRUE(Round().empty()) << "not complied yet";
  EXPECT_GT(node_.LentBy(owner_.id), 0u);
  lessee_.leases_applied_generation = 42;
  EXPECT_EQ(Round(), std::vector<std::uint32_t>{owner_.id}) << "the owner's limit comes back";
  EXPECT_EQ(node_.LentBy(owner_.id), 0u);
  EXPECT_EQ(metrics_.completed().Value(), 1);
}

TEST_F(NodeLendingTest, ShouldSendEverythingHomeWithPlacementOff) {
  options_.node_placement = false;
  Round();
  EXPECT_TRUE(node_.book().leases().empty());
  for (const ipc::SwapEntry& e : LesseePolicy().entries) {
    EXPECT_EQ(e.tier, static_cast<std::uint16_t>(ipc::Tier::kHost));
  }
}

// Issue 16: a pipeline process on three GPUs overflows the first; its later stages peak lower.
// The room on them beyond its peak there is lent to its own swaps (self-only GPUs): no opt-in
// and no uid rule needed, its limit on the first GPU not lowered, nobody else let in.
class SelfLendingTest : public NodeLendingTest {
 protected:
  void SetUp() override {
    NodeLendingTest::SetUp();
    options_.all_gpus = false;                 // no GPU opted in for other clients
    options_.borrowers = UidRule{false, {0}};  // and this uid may not borrow from them
    pipeline_.id = 7;
    pipeline_.uid = 1002;
    pipeline_.devices = {Device(0, "0000:11:00.0", 40 * kGiB, 0b110),
                         Device(1, "0000:12:00.0", 40 * kGiB, 0b101),
                         Device(2, "0000:13:00.0", 40 * kGiB, 0b011)};
    pipeline_.executor_ordinal = 0;
    pipeline_.device_peaks = {40 * kGiB, 36 * kGiB, 30 * kGiB, 0, 0, 0, 0, 0};
    pipeline_.limit_bytes = 32 * kGiB;
    pipeline_.peak_bytes = 106 * kGiB;  // all devices together: not what any GPU lends from
    pipeline_.demand_bytes = 12 * kGiB;
    pipeline_.iteration_s = 1.0;
    pipeline_.window_s = 0.5;
  }
  std::vector<std::uint32_t> Round(std::vector<NodeClient> others = {}) {
    others.push_back(pipeline_);
    return node_.Round(1'000, others, options_);
  }
  std::uint64_t LeasedOn(const std::string& gpu) {
    std::uint64_t bytes = 0;
    for (const Lease& l : node_.book().Active(pipeline_.id)) bytes += l.gpu == gpu ? l.bytes : 0;
    return bytes;
  }
  NodeClient pipeline_;
};

TEST_F(SelfLendingTest, ShouldLendItsOtherDevicesRoomToItsOwnSwapsWithoutLoweringItsLimit) {
  EXPECT_EQ(Round(), std::vector<std::uint32_t>{pipeline_.id});
  // Spares: 40 - 36 - 1 = 3 GiB on device 1, 40 - 30 - 1 = 9 GiB on device 2: 12 GiB in all,
  // the whole demand, nothing on device 0 (its own, overflowing).
  EXPECT_LE(LeasedOn("0000:12:00.0"), 3 * kGiB);
  EXPECT_LE(LeasedOn("0000:13:00.0"), 9 * kGiB);
  EXPECT_EQ(LeasedOn("0000:12:00.0") + LeasedOn("0000:13:00.0"), 12 * kGiB);
  EXPECT_EQ(LeasedOn("0000:11:00.0"), 0u);
  EXPECT_EQ(node_.LentBy(pipeline_.id), 0u) << "its own room lowers no limit";
  ipc::Policy p = PolicyOf(24, 512 * kMiB);
  node_.Decorate(pipeline_.id, pipeline_.devices, pipeline_.limit_bytes, &p);
  EXPECT_EQ(p.summary.lent_bytes, 0u);
  std::map<std::uint16_t, std::uint64_t> on_helper;
  for (const ipc::SwapEntry& e : p.entries) {
    ASSERT_EQ(e.tier, static_cast<std::uint16_t>(ipc::Tier::kPeerGpu));
    on_helper[e.helper] += e.bytes;
  }
  EXPECT_EQ(on_helper[1], LeasedOn("0000:12:00.0"));
  EXPECT_EQ(on_helper[2], LeasedOn("0000:13:00.0"));
  EXPECT_FALSE(on_helper.contains(0));
}

TEST_F(SelfLendingTest, ShouldNotLendItsRoomToAnotherClient) {
  // Another process on device 3 sees device 2 too, and may borrow anything opted in.
  options_.borrowers = UidRule{};
  NodeClient other = lessee_;
  other.devices = {Device(0, "0000:14:00.0", 8 * kGiB, 0b10),
                   Device(1, "0000:13:00.0", 40 * kGiB, 0b01)};
  pipeline_.demand_bytes = 0;  // the pipeline swaps nothing: device 2's room goes begging
  Round({other});
  EXPECT_TRUE(node_.book().Active(other.id).empty());
  EXPECT_TRUE(node_.book().Active(pipeline_.id).empty());
}

TEST_F(SelfLendingTest, ShouldNotLendADeviceAnotherClientAlsoUses) {
  NodeClient other = lessee_;
  other.devices = {Device(0, "0000:14:00.0", 8 * kGiB, 0b10),
                   Device(1, "0000:13:00.0", 40 * kGiB, 0b01)};
  other.executor_ordinal = 0;
  other.device_peaks = {8 * kGiB, 1 * kGiB};  // it allocates on device 2 as well
  other.demand_bytes = 0;
  Round({other});
  EXPECT_EQ(LeasedOn("0000:13:00.0"), 0u);
  EXPECT_EQ(LeasedOn("0000:12:00.0"), 3 * kGiB);
}

TEST_F(SelfLendingTest, ShouldRevokeItsOwnLeaseWhenItsPeakThereGrowsIntoIt) {
  Round();
  const std::uint64_t before = LeasedOn("0000:13:00.0");
  ASSERT_GT(before, 0u);
  pipeline_.device_peaks[2] = 38 * kGiB;  // 1 GiB left beyond the reserve: less than its lease
  EXPECT_EQ(Round(), std::vector<std::uint32_t>{pipeline_.id}) << "its policy drops the lease";
  EXPECT_EQ(LeasedOn("0000:13:00.0"), 0u);
  EXPECT_GT(node_.book().LentOn("0000:13:00.0"), 0u) << "revoking until it complies";
}

TEST_F(SelfLendingTest, ShouldUseTheExecutorsDeviceAsItsOwnGpu) {
  // The executor serves device 1 (a torchrun rank that sees every GPU): device 0, listed first,
  // is then one of its other devices and lends; device 1 does not.
  pipeline_.executor_ordinal = 1;
  pipeline_.device_peaks = {30 * kGiB, 40 * kGiB, 36 * kGiB, 0, 0, 0, 0, 0};
  Round();
  EXPECT_EQ(LeasedOn("0000:12:00.0"), 0u);
  EXPECT_GT(LeasedOn("0000:11:00.0"), 0u);
}

}  // namespace
}  // namespace chameleon::daemon
