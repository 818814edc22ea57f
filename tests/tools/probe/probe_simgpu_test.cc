// chameleon-probe on simgpu: the bandwidths it measures (CUDA events = virtual time) are the
// SIMGPU_TOPOLOGY figures simgpu was given, within 2 %, and the YAML it prints, fed back as
// SIMGPU_TOPOLOGY, makes a second probe measure the same figures.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "support/child_process.h"
#include "support/required_file.h"

namespace {

using chameleon::test_support::EnvChanges;

using Links = std::map<std::pair<int, int>, double>;

struct Probed {
  double h2d = 0;
  double d2h = 0;
  double host_link = 0;
  Links peer;
  std::vector<int> numa;
  std::string yaml;
};

class ProbeSimgpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(chameleon::test_support::RequiredFile(PROBE_BINARY, "chameleon-probe"));
    std::string templ = ::testing::TempDir() + "/probe.XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }

  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  chameleon::test_support::ChildResult Probe(const std::string& topology,
                                             std::vector<std::string> args) const {
    args.insert(args.begin(), PROBE_BINARY);
    const EnvChanges env{{"LD_LIBRARY_PATH", SIMGPU_DIR},
                         {"SIMGPU_DEVICES", "2"},
                         {"SIMGPU_MEMORY", "1GiB"},
                         {"SIMGPU_TOPOLOGY", topology},
                         {"LD_PRELOAD", std::nullopt}};
    return chameleon::test_support::RunChild(args, env, dir_);
  }

  Probed ProbeYaml(const std::string& topology) const {
    const auto r = Probe(topology, {"--bytes", "16MiB", "--trials", "3", "--yaml"});
    EXPECT_EQ(r.status, 0) << r.err;
    Probed p;
    p.yaml = r.out;
    const YAML::Node y = YAML::Load(r.out);
    p.h2d = y["host_to_device_bandwidth"].as<double>();
    p.d2h = y["device_to_host_bandwidth"].as<double>();
    p.host_link = y["host_link_bandwidth"].as<double>();
    for (const auto& l : y["peer_links"])
      p.peer[{l["from"].as<int>(), l["to"].as<int>()}] = l["bandwidth"].as<double>();
    p.numa = y["numa_nodes"].as<std::vector<int>>();
    return p;
  }

  std::string dir_;
};

// One host-link figure (simgpu without per-direction keys models both directions alike) and
// two different one-way peer links.
constexpr const char* kTopology =
    "numa_nodes: [0, 1]\n"
    "host_link_bandwidth: 3.0e10\n"
    "peer_links:\n"
    "  - {from: 0, to: 1, bandwidth: 1.0e11, bidirectional: false}\n"
    "  - {from: 1, to: 0, bandwidth: 2.0e11, bidirectional: false}\n";

TEST_F(ProbeSimgpuTest, ShouldMeasureTheConfiguredLinksWithinTwoPercent) {
  const Probed p = ProbeYaml(Write("topology.yaml", kTopology));
  EXPECT_NEAR(p.h2d, 3.0e10, 0.02 * 3.0e10);
  EXPECT_NEAR(p.d2h, 3.0e10, 0.02 * 3.0e10);
  EXPECT_EQ(p.host_link, std::min(p.h2d, p.d2h));
  ASSERT_EQ(p.peer.size(), 2u) << p.yaml;
  EXPECT_NEAR((p.peer.at({0, 1})), 1.0e11, 0.02 * 1.0e11);
  EXPECT_NEAR((p.peer.at({1, 0})), 2.0e11, 0.02 * 2.0e11);
  EXPECT_EQ(p.numa, (std::vector<int>{0, 1}));
}

TEST_F(ProbeSimgpuTest, ShouldMeasureTheSameFiguresUnderTheYamlItPrinted) {
  const Probed first = ProbeYaml(Write("topology.yaml", kTopology));
  const Probed second = ProbeYaml(Write("probed.yaml", first.yaml));
  EXPECT_NEAR(second.h2d, first.h2d, 0.02 * first.h2d);
  EXPECT_NEAR(second.d2h, first.d2h, 0.02 * first.d2h);
  ASSERT_EQ(second.peer.size(), first.peer.size());
  for (const auto& [pair, bw] : first.peer) EXPECT_NEAR(second.peer.at(pair), bw, 0.02 * bw);
  EXPECT_EQ(second.numa, first.numa);
}

TEST_F(ProbeSimgpuTest, ShouldBindPinnedMemoryToEachNumaNodeOfTheDevices) {
  const auto r = Probe(Write("topology.yaml", kTopology), {"--bytes", "4MiB", "--trials", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  // Two devices on nodes 0 and 1: four (device, node) rows, all on simgpu's host-NUMA VMM memory.
  std::size_t rows = 0;
  for (std::size_t at = r.out.find("vmm-host-numa"); at != std::string::npos;
       at = r.out.find("vmm-host-numa", at + 1))
    ++rows;
  EXPECT_EQ(rows, 4u) << r.out;
}

TEST_F(ProbeSimgpuTest, ShouldExitTwoOnADeviceTheMachineDoesNotHave) {
  EXPECT_EQ(Probe(Write("topology.yaml", kTopology), {"--devices", "0,2"}).status, 2);
  EXPECT_EQ(Probe(Write("topology.yaml", kTopology), {"--bytes", "0"}).status, 2);
}

}  // namespace
