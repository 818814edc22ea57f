// BuildNode (topology/node.h) on hand-made GPU reports, fake sysfs trees and override YAML: the
// places and links it makes, where each figure came from, and the one-line errors it refuses with.
#include "chameleon/topology/node.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace chameleon::topology {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kH200 = 150754820096;  // what a real H200 SXM reports

class NodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("node_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "node");
    fs::create_directories(dir_ / "pci");
    sources_.sysfs_node_root = (dir_ / "node").string();
    sources_.sysfs_pci_root = (dir_ / "pci").string();
    sources_.use_nvml = false;
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A sysfs NUMA node as the kernel writes it: meminfo ("Node %d MemTotal: %8lu kB") and the
  // SLIT distance row.
  void Numa(int n, std::uint64_t kib, const std::string& distance) {
    const fs::path d = dir_ / "node" / ("node" + std::to_string(n));
    fs::create_directories(d);
    std::ofstream(d / "meminfo") << "Node " << n << " MemTotal:       " << kib << " kB\n";
    std::ofstream(d / "distance") << distance << "\n";
  }
  void PciNuma(const std::string& bus, const std::string& value) {
    fs::create_directories(dir_ / "pci" / bus);
    std::ofstream(dir_ / "pci" / bus / "numa_node") << value << "\n";
  }
  static GpuReport Gpu(const std::string& bus, int numa, std::vector<std::string> peers = {},
                       std::uint64_t memory = kH200) {
    return GpuReport{bus, 0, numa, memory, std::move(peers)};
  }
  Node Build() {
    Node node;
    error_ = BuildNode(sources_, &node);
    return node;
  }

  fs::path dir_;
  NodeSources sources_;
  std::string error_;
};

TEST_F(NodeTest, ShouldMakePlacesFromReportsAndSysfs) {
  Numa(0, 4 * 1024 * 1024, "10 21");  // 4 GiB
  Numa(1, 8 * 1024 * 1024, "21 10");
  sources_.gpus = {Gpu("0000:19:00.0", 1), Gpu("0000:18:00.0", 0)};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_EQ(node.gpus[0].pci_bus_id, "0000:18:00.0");  // sorted by bus id, not report order
  EXPECT_EQ(node.gpus[1].host_numa_node, 1);
  EXPECT_EQ(node.gpus[0].capacity, kH200);
  ASSERT_EQ(node.numa.size(), 2u);
  EXPECT_EQ(node.numa[0].capacity, 4 * kGiB);
  EXPECT_EQ(node.numa[1].capacity, 8 * kGiB);
  EXPECT_EQ(node.numa[1].distances, (std::vector<int>{21, 10}));
  EXPECT_EQ(node.topology.place_count(), 4);
  EXPECT_EQ(node.topology.place(node.numa[1].place).kind, PlaceKind::kNumaNode);
  EXPECT_EQ(node.provenance.gpus, "hello");
  EXPECT_EQ(node.provenance.numa, "sysfs");
  EXPECT_EQ(node.provenance.links, "host defaults, peer defaults, numa defaults");
  EXPECT_TRUE(node.warnings.empty());
}

TEST_F(NodeTest, ShouldLinkEachGpuToItsOwnNumaNodeAtTheOverrideFiguresPerDirection) {
  sources_.override_yaml =
      "host_numa_bytes: [1TiB, 1TiB]\nhost_to_device_bandwidth: 5.48e10\n"
      "device_to_host_bandwidth: 4.68e10\nnuma_link_bandwidth: 6e10\ncopy_latency_ns: 1000\n";
  sources_.gpus = {Gpu("0000:18:00.0", 0), Gpu("0000:1c:00.0", 1)};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  const Topology& t = node.topology;
  const int g0 = node.gpus[0].place, g1 = node.gpus[1].place;
  const int n0 = node.numa[0].place, n1 = node.numa[1].place;
  EXPECT_EQ(node.numa[0].capacity, 1ull << 40);
  EXPECT_DOUBLE_EQ(t.links()[t.LinkIndex(g0, n0)].bandwidth, 4.68e10);
  EXPECT_DOUBLE_EQ(t.links()[t.LinkIndex(n0, g0)].bandwidth, 5.48e10);
  EXPECT_EQ(t.LinkIndex(g0, n1), -1);  // a remote NUMA node is reached through the socket link
  EXPECT_EQ(t.Hops(g0, n1), 2);
  EXPECT_DOUBLE_EQ(t.Bandwidth(g0, n1), 4.68e10);
  EXPECT_DOUBLE_EQ(t.links()[t.LinkIndex(n0, n1)].bandwidth, 6e10);
  // No P2P reported: GPU to GPU goes through host memory, 3 hops via both sockets.
  EXPECT_EQ(t.Hops(g0, g1), 3);
  EXPECT_DOUBLE_EQ(t.links()[t.LinkIndex(n0, n1)].latency, 1e-6 * 2.1);
  EXPECT_EQ(node.provenance.numa, "yaml");
  EXPECT_EQ(node.provenance.links, "host yaml, peer defaults, numa yaml");
}

TEST_F(NodeTest, ShouldAddPeerLinksWherePeerAccessIsReported) {
  sources_.override_yaml = "host_numa_bytes: [64GiB]\npeer_link_bandwidth: 3.7e11\n";
  // Client A sees GPUs 18 and 19 and reports 18 -> 19; client B sees only 19 and 18 through its
  // own ordinals: peer lists of one GPU from several clients are united.
  sources_.gpus = {Gpu("0000:18:00.0", 0, {"0000:19:00.0"}), Gpu("0000:19:00.0", 0),
                   Gpu("0000:19:00.0", 0, {"0000:18:00.0"})};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  const Topology& t = node.topology;
  const int g0 = node.gpus[0].place, g1 = node.gpus[1].place;
  EXPECT_EQ(t.Hops(g0, g1), 1);
  EXPECT_EQ(t.Hops(g1, g0), 1);
  EXPECT_DOUBLE_EQ(t.Bandwidth(g0, g1), 3.7e11);
  EXPECT_EQ(node.gpus[1].peers, (std::vector<std::string>{"0000:18:00.0"}));
}

TEST_F(NodeTest, ShouldKeepPeerAccessOneWayWhenOnlyOneDirectionIsReported) {
  sources_.override_yaml = "host_numa_bytes: [64GiB]\n";
  sources_.gpus = {Gpu("0000:18:00.0", 0, {"0000:19:00.0"}), Gpu("0000:19:00.0", 0)};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  const Topology& t = node.topology;
  EXPECT_EQ(t.Hops(node.gpus[0].place, node.gpus[1].place), 1);
  EXPECT_EQ(t.Hops(node.gpus[1].place, node.gpus[0].place), 2);  // via host memory
}

TEST_F(NodeTest, ShouldIgnorePeersThatNoClientReported) {
  sources_.override_yaml = "host_numa_bytes: [64GiB]\n";
  sources_.gpus = {Gpu("0000:18:00.0", 0, {"0000:99:00.0"})};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  EXPECT_TRUE(node.gpus[0].peers.empty());
  EXPECT_EQ(node.topology.links().size(), 2u);  // the host link, both ways
}

TEST_F(NodeTest, ShouldNormaliseBusIdsSoTwoSpellingsAreOneGpu) {
  sources_.override_yaml = "host_numa_bytes: [64GiB]\n";
  sources_.gpus = {Gpu("0000:3B:00.0", 0), Gpu("00000000:3b:00.0", 0)};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  ASSERT_EQ(node.gpus.size(), 1u);
  EXPECT_EQ(node.gpus[0].pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(node.GpuIndex("0000:3b:00.0"), 0);
  EXPECT_EQ(node.GpuIndex("0000:3c:00.0"), -1);
}

TEST_F(NodeTest, ShouldRefuseClientsThatDisagreeOnAGpu) {
  sources_.override_yaml = "host_numa_bytes: [64GiB, 64GiB]\n";
  sources_.gpus = {Gpu("0000:18:00.0", 0), Gpu("0000:18:00.0", 0, {}, 80 * kGiB)};
  Build();
  EXPECT_EQ(error_,
            "GPU 0000:18:00.0: clients disagree on its total memory (150754820096 vs 85899345920)");
  sources_.gpus = {Gpu("0000:18:00.0", 0), Gpu("0000:18:00.0", 1)};
  Build();
  EXPECT_EQ(error_, "GPU 0000:18:00.0: clients disagree on its host NUMA node (0 vs 1)");
  sources_.gpus = {Gpu("0000:18:00.0", -1), Gpu("0000:18:00.0", 1)};  // unknown merges
  const Node node = Build();
  EXPECT_EQ(error_, "");
  EXPECT_EQ(node.gpus[0].host_numa_node, 1);
}

TEST_F(NodeTest, ShouldRefuseMalformedReports) {
  sources_.override_yaml = "host_numa_bytes: [64GiB]\n";
  for (const char* bus : {"", "0000:18:00", "0000:18:00.8", "0000:18:20.0", "zz00:18:00.0",
                          "0000:18:00.0 ", "10000:18:00.0"}) {
    sources_.gpus = {Gpu(bus, 0)};
    Build();
    EXPECT_EQ(error_, "PCI bus id '" + std::string(bus) + "' is not dddd:bb:dd.f") << bus;
  }
  sources_.gpus = {Gpu("0000:18:00.0", 0, {}, 0)};
  Build();
  EXPECT_EQ(error_, "GPU 0000:18:00.0: total memory 0 is not in 1 B..16 TiB");
  sources_.gpus = {Gpu("0000:18:00.0", 70)};
  Build();
  EXPECT_EQ(error_, "GPU 0000:18:00.0: host NUMA node 70 is not in -1..63");
  sources_.gpus = {Gpu("0000:18:00.0", 0, {"bad"})};
  Build();
  EXPECT_EQ(error_, "GPU 0000:18:00.0 peer: PCI bus id 'bad' is not dddd:bb:dd.f");
}

TEST_F(NodeTest, ShouldRefuseABadOverrideNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"peer_link_bandwidth: -1\n",
       "CHAMELEON_TOPOLOGY: peer_link_bandwidth: must be in (0, 1e13] bytes/s"},
      {"host_link_bandwidth: fast\n",
       "CHAMELEON_TOPOLOGY: host_link_bandwidth: expected a number of bytes/s"},
      {"numa_link_bandwidth: 1e20\n",
       "CHAMELEON_TOPOLOGY: numa_link_bandwidth: must be in (0, 1e13] bytes/s"},
      {"device_to_host_bandwidth: .nan\n",
       "CHAMELEON_TOPOLOGY: device_to_host_bandwidth: must be in (0, 1e13] bytes/s"},
      {"copy_latency_ns: -5\n", "CHAMELEON_TOPOLOGY: copy_latency_ns: must be in [0, 1e9]"},
      {"host_numa_bytes: [0]\n",
       "CHAMELEON_TOPOLOGY: host_numa_bytes: a NUMA node's memory must be > 0"},
      {"- a\n- b\n", "CHAMELEON_TOPOLOGY: the top level must be a map of machine keys"},
  };
  for (const auto& [yaml, error] : cases) {
    sources_.override_yaml = yaml;
    Build();
    EXPECT_EQ(error_, error) << yaml;
  }
  sources_.override_yaml = "a: [\n";
  Build();
  EXPECT_EQ(error_.rfind("CHAMELEON_TOPOLOGY: not YAML: ", 0), 0u) << error_;
}

TEST_F(NodeTest, ShouldAcceptEveryShippedMachineFileAsTheOverride) {
  for (const auto& entry : fs::directory_iterator(MACHINES_DIR)) {
    std::ifstream in(entry.path());
    sources_.override_yaml.assign(std::istreambuf_iterator<char>(in), {});
    sources_.gpus = {Gpu("0000:18:00.0", 0)};
    const Node node = Build();
    EXPECT_EQ(error_, "") << entry.path();
    EXPECT_EQ(node.provenance.host_link, "yaml") << entry.path();
    EXPECT_EQ(node.provenance.peer_link, "yaml") << entry.path();
  }
}

TEST_F(NodeTest, ShouldReadAGpusNumaNodeFromPciSysfsWhenTheDriverDoesNotSay) {
  Numa(0, 1024 * 1024, "10 21");
  Numa(1, 1024 * 1024, "21 10");
  PciNuma("0000:18:00.0", "1");
  sources_.gpus = {Gpu("0000:18:00.0", -1)};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  EXPECT_EQ(node.gpus[0].host_numa_node, 1);
  EXPECT_EQ(node.provenance.gpu_numa, "hello+sysfs");
}

TEST_F(NodeTest, ShouldAttachAGpuOfUnknownNumaNodeToNodeZeroWithAWarning) {
  Numa(0, 1024 * 1024, "10");
  PciNuma("0000:18:00.0", "-1");
  sources_.gpus = {Gpu("0000:18:00.0", -1), Gpu("0000:19:00.0", 3)};
  const Node node = Build();
  ASSERT_EQ(error_, "");
  EXPECT_EQ(node.gpus[0].host_numa_node, 0);
  EXPECT_EQ(node.gpus[1].host_numa_node, 0);
  EXPECT_EQ(node.warnings.size(), 2u);
  EXPECT_EQ(node.provenance.gpu_numa, "default");
}

TEST_F(NodeTest, ShouldFallBackToDefaultDistancesWhenSysfsRowsAreBad) {
  Numa(0, 1024 * 1024, "10 21");
  Numa(1, 1024 * 1024, "21");  // one distance for two nodes
  const Node node = Build();
  ASSERT_EQ(error_, "");
  ASSERT_EQ(node.numa.size(), 2u);
  EXPECT_EQ(node.numa[1].distances, (std::vector<int>{21, 10}));
  ASSERT_EQ(node.warnings.size(), 1u);
  Numa(1, 1024 * 1024, "21 300");
  EXPECT_EQ(Build().warnings.size(), 1u);
}

TEST_F(NodeTest, ShouldUsePhysicalRamWithAWarningWhenNeitherYamlNorSysfsSays) {
  const Node node = Build();  // an empty sysfs tree, no override, no GPUs
  ASSERT_EQ(error_, "");
  EXPECT_EQ(node.numa.size(), 1u);
  EXPECT_GT(node.numa[0].capacity, 0u);
  EXPECT_EQ(node.provenance.numa, "physical RAM");
  EXPECT_EQ(node.provenance.gpus, "none");
  EXPECT_EQ(node.warnings.size(), 1u);
}

}  // namespace
}  // namespace chameleon::topology
