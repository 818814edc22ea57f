// NodeLending's rules without a daemon: who may lend and borrow, what a policy carries, the
// order of republishing. Client views are built by hand; the node is built from their device
// facts and a CHAMELEON_TOPOLOGY-style override (NVLink peers, one NUMA node).
#include "chameleon/daemon/node_lending.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "device_facts.h"

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

ipc::DeviceFacts Device(std::int32_t ordinal, const char* bus, std::uint64_t memory,
                        std::uint64_t peer_mask) {
  return MakeDeviceFacts(ordinal, bus, memory, peer_mask);
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
    ipc::Policy p;
    for (int i = 0; i < 4; ++i) {
      ipc::SwapEntry e{};
      e.bytes = 512 * kMiB;
      p.entries.push_back(e);
    }
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
  ipc::Policy p;
  for (int i = 0; i < 40; ++i) {
    ipc::SwapEntry e{};
    e.bytes = 64 << 10;  // 64 KiB: each takes a whole chunk on the peer
    p.entries.push_back(e);
  }
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

}  // namespace
}  // namespace chameleon::daemon
