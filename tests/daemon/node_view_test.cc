// NodeView (daemon/node_view.h): the node rebuilt from clients' HELLO device facts as they come
// and go, a contradicting client left out and named, a bad override dropped, NVML read once per
// set of GPUs (through the fake libnvidia-ml of tests/topology).
#include "chameleon/daemon/node_view.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "device_facts.h"

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

ipc::DeviceFacts Device(int ordinal, const char* bus, std::uint64_t peers = 0, int numa = 0,
                        std::uint64_t memory = 80 * kGiB) {
  return MakeDeviceFacts(ordinal, bus, memory, peers, numa);
}

topology::NodeSources Sources() {
  topology::NodeSources s;
  s.override_yaml = "host_numa_bytes: [512GiB, 512GiB]\n";
  s.sysfs_pci_root = "/nonexistent";
  s.use_nvml = false;
  return s;
}

TEST(NodeViewTest, ShouldTurnPeerBitsIntoTheBusIdsOfTheClientsOwnOrdinals) {
  // CUDA_VISIBLE_DEVICES=3,1: ordinal 0 is bus 1b, ordinal 1 is bus 19; bit 5 names nothing.
  const ipc::DeviceFacts devices[] = {Device(0, "0000:1b:00.0", 0b100010),
                                      Device(1, "0000:19:00.0", 0b1)};
  const auto reports = GpuReportsFromHello(devices);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].peers, (std::vector<std::string>{"0000:19:00.0"}));
  EXPECT_EQ(reports[1].peers, (std::vector<std::string>{"0000:1b:00.0"}));
  EXPECT_EQ(reports[1].ordinal, 1);
  EXPECT_EQ(reports[1].total_memory, 80 * kGiB);
}

TEST(NodeViewTest, ShouldRebuildAsClientsComeAndGo) {
  NodeView view(Sources());
  const std::uint64_t g0 = view.generation();
  EXPECT_TRUE(view.node().gpus.empty());
  EXPECT_EQ(view.node().numa.size(), 2u);
  const ipc::DeviceFacts a[] = {Device(0, "0000:18:00.0", 0b10), Device(1, "0000:19:00.0", 0b1)};
  const ipc::DeviceFacts b[] = {Device(0, "0000:19:00.0", 0, 0), Device(1, "0000:9a:00.0", 0, 1)};
  EXPECT_EQ(view.AddClient(1, a), "");
  EXPECT_EQ(view.AddClient(2, b), "");
  EXPECT_GT(view.generation(), g0);
  ASSERT_EQ(view.node().gpus.size(), 3u);  // 19 reported twice is one GPU
  EXPECT_EQ(view.node().gpus[2].host_numa_node, 1);
  view.RemoveClient(1);
  ASSERT_EQ(view.node().gpus.size(), 2u);  // 18 gone, 19 still reported by client 2
  EXPECT_EQ(view.node().gpus[0].pci_bus_id, "0000:19:00.0");
  EXPECT_TRUE(view.node().gpus[0].peers.empty());  // only client 1 saw the P2P path
  view.RemoveClient(2);
  EXPECT_TRUE(view.node().gpus.empty());
}

TEST(NodeViewTest, ShouldLeaveOutAClientThatContradictsTheOthers) {
  NodeView view(Sources());
  const ipc::DeviceFacts a[] = {Device(0, "0000:18:00.0")};
  const ipc::DeviceFacts liar[] = {Device(0, "0000:18:00.0", 0, 0, 40 * kGiB),
                                   Device(1, "0000:77:00.0")};
  ASSERT_EQ(view.AddClient(1, a), "");
  const std::uint64_t before = view.generation();
  EXPECT_EQ(view.AddClient(2, liar),
            "GPU 0000:18:00.0: clients disagree on its total memory (85899345920 vs 42949672960)");
  EXPECT_EQ(view.node().gpus.size(), 1u);  // not even its other GPU
  EXPECT_EQ(view.node().gpus[0].capacity, 80 * kGiB);
  ASSERT_EQ(view.refused().count(2), 1u);
  EXPECT_GT(view.generation(), before);
  view.RemoveClient(2);
  EXPECT_TRUE(view.refused().empty());
  const ipc::DeviceFacts nameless[] = {Device(0, "")};
  EXPECT_EQ(view.AddClient(3, nameless), "PCI bus id '' is not dddd:bb:dd.f");
}

TEST(NodeViewTest, ShouldDropABadOverrideWithAWarning) {
  topology::NodeSources s = Sources();
  s.override_yaml = "peer_link_bandwidth: -3\n";
  NodeView view(s);
  ASSERT_EQ(view.warnings().size(), 1u);
  EXPECT_EQ(view.warnings()[0],
            "CHAMELEON_TOPOLOGY: peer_link_bandwidth: must be in (0, 1e13] bytes/s (the override "
            "is ignored)");
  EXPECT_EQ(view.node().provenance.peer_link, "defaults");
  const ipc::DeviceFacts a[] = {Device(0, "0000:18:00.0")};
  EXPECT_EQ(view.AddClient(1, a), "");
}

TEST(NodeViewTest, ShouldReadNvmlOncePerSetOfGpus) {
  void* fake = ::dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(fake, nullptr) << ::dlerror();
  auto configure =
      reinterpret_cast<void (*)(const char*, int)>(::dlsym(fake, "fake_nvml_configure"));
  auto init_calls = reinterpret_cast<int (*)()>(::dlsym(fake, "fake_nvml_init_calls"));
  ASSERT_NE(configure, nullptr);
  ASSERT_NE(init_calls, nullptr);
  configure("0000:18:00.0 0000:19:00.0\n0000:19:00.0 0000:18:00.0\n", 0);
  topology::NodeSources s = Sources();
  s.use_nvml = true;
  s.nvml_library = FAKE_NVML_PATH;
  NodeView view(s);
  const int start = init_calls();
  EXPECT_EQ(start, 0);  // no GPUs yet: nothing to ask
  const ipc::DeviceFacts a[] = {Device(0, "0000:18:00.0", 0b10), Device(1, "0000:19:00.0", 0b1)};
  const ipc::DeviceFacts b[] = {Device(0, "0000:19:00.0")};
  ASSERT_EQ(view.AddClient(1, a), "");
  ASSERT_EQ(view.AddClient(2, b), "");  // no new GPU: no new NVML read
  view.RemoveClient(2);
  EXPECT_EQ(init_calls(), 1);
  EXPECT_EQ(view.node().provenance.peer_link, "nvml");
  EXPECT_DOUBLE_EQ(
      view.node().topology.Bandwidth(view.node().gpus[0].place, view.node().gpus[1].place), 25e9);
  const ipc::DeviceFacts c[] = {Device(0, "0000:1a:00.0")};
  ASSERT_EQ(view.AddClient(3, c), "");
  EXPECT_EQ(init_calls(), 2);
  ::dlclose(fake);
}

}  // namespace
}  // namespace chameleon::daemon
