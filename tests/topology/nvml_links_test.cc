// The NVML loader (topology/nvml_links.h) against a fake libnvidia-ml (fake_nvml.cc): active
// links and where they lead, NVSwitch nodes, the library absent or failing, and what BuildNode
// makes of it.
#include "chameleon/topology/nvml_links.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "chameleon/topology/node.h"

namespace chameleon::topology {
namespace {

constexpr const char* kA = "0000:18:00.0";
constexpr const char* kB = "0000:19:00.0";
constexpr const char* kC = "0000:1a:00.0";

class NvmlLinksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Held open for the whole test, so that the loader's dlopen/dlclose keeps the fake's state.
    lib_ = ::dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << ::dlerror();
    configure_ = reinterpret_cast<void (*)(const char*, int)>(::dlsym(lib_, "fake_nvml_configure"));
    ASSERT_NE(configure_, nullptr);
  }
  void TearDown() override { ::dlclose(lib_); }

  void* lib_ = nullptr;
  void (*configure_)(const char*, int) = nullptr;
};

TEST_F(NvmlLinksTest, ShouldCountDirectLinksBetweenTwoGpus) {
  // A and B joined by 4 links (NVLink bridges), C by none.
  configure_(
      "0000:18:00.0 0000:19:00.0 0000:19:00.0 0000:19:00.0 0000:19:00.0\n"
      "0000:19:00.0 0000:18:00.0 0000:18:00.0 0000:18:00.0 0000:18:00.0\n"
      "0000:1a:00.0\n",
      0);
  const NvmlLinks links = ReadNvmlLinks(FAKE_NVML_PATH, {kA, kB, kC});
  ASSERT_TRUE(links.loaded) << links.status;
  EXPECT_EQ(links.status, "loaded");
  ASSERT_EQ(links.gpus.size(), 3u);
  EXPECT_EQ(links.gpus[0].remotes.size(), 4u);
  EXPECT_EQ(links.gpus[0].remotes[0], kB);
  EXPECT_DOUBLE_EQ(NvLinkBandwidth(links, kA, kB), 4 * 25e9);
  EXPECT_DOUBLE_EQ(NvLinkBandwidth(links, kA, kC), 0);
}

TEST_F(NvmlLinksTest, ShouldTakeTheFewerSwitchLinksBetweenGpusOnNvSwitches) {
  // A has 18 links to switches (H100 SXM), B only 12 of them up.
  std::string a = kA, b = kB;
  for (int i = 0; i < 18; ++i) a += i % 2 ? " 0000:c1:00.0" : " 0000:c2:00.0";
  for (int i = 0; i < 12; ++i) b += " 0000:c1:00.0";
  configure_((a + "\n" + b + "\n").c_str(), 0);
  const NvmlLinks links = ReadNvmlLinks(FAKE_NVML_PATH, {kA, kB});
  ASSERT_TRUE(links.loaded);
  EXPECT_DOUBLE_EQ(NvLinkBandwidth(links, kA, kB), 12 * 25e9);
  EXPECT_DOUBLE_EQ(NvLinkBandwidth(links, kB, kA), 12 * 25e9);
}

TEST_F(NvmlLinksTest, ShouldWarnAboutGpusNvmlDoesNotKnow) {
  configure_("0000:18:00.0\n", 0);
  const NvmlLinks links = ReadNvmlLinks(FAKE_NVML_PATH, {kA, kB});
  ASSERT_TRUE(links.loaded);
  EXPECT_EQ(links.gpus.size(), 1u);
  EXPECT_EQ(links.warnings, (std::vector<std::string>{"nvml: GPU 0000:19:00.0 unknown (error 6)"}));
  EXPECT_DOUBLE_EQ(NvLinkBandwidth(links, kA, kB), 0);
}

TEST_F(NvmlLinksTest, ShouldSayWhyWhenInitFails) {
  configure_("", 9);  // NVML_ERROR_DRIVER_NOT_LOADED
  const NvmlLinks links = ReadNvmlLinks(FAKE_NVML_PATH, {kA});
  EXPECT_FALSE(links.loaded);
  EXPECT_EQ(links.status, "nvmlInit_v2 failed (error 9)");
}

TEST_F(NvmlLinksTest, ShouldSayWhenTheLibraryIsAbsentOrLacksASymbol) {
  const NvmlLinks absent = ReadNvmlLinks("/nonexistent/libnvidia-ml.so.1", {kA});
  EXPECT_FALSE(absent.loaded);
  EXPECT_EQ(absent.status.rfind("cannot load /nonexistent/libnvidia-ml.so.1: ", 0), 0u);
  // libm loads but is no NVML.
  const NvmlLinks wrong = ReadNvmlLinks("libm.so.6", {kA});
  EXPECT_FALSE(wrong.loaded);
  EXPECT_EQ(wrong.status, "libm.so.6: no symbol nvmlInit_v2");
}

TEST_F(NvmlLinksTest, ShouldGivePeerLinksNvlinkBandwidthInBuildNode) {
  configure_("0000:18:00.0 0000:19:00.0 0000:19:00.0\n0000:19:00.0 0000:18:00.0 0000:18:00.0\n", 0);
  NodeSources s;
  s.override_yaml = "host_numa_bytes: [64GiB]\n";
  s.nvml_library = FAKE_NVML_PATH;
  s.gpus = {GpuReport{kA, 0, 0, 1ull << 30, {kB}}, GpuReport{kB, 1, 0, 1ull << 30, {kA}}};
  Node node;
  ASSERT_EQ(BuildNode(s, &node), "");
  EXPECT_DOUBLE_EQ(node.topology.Bandwidth(node.gpus[0].place, node.gpus[1].place), 50e9);
  EXPECT_EQ(node.provenance.peer_link, "nvml");
  EXPECT_EQ(node.provenance.nvml, "loaded");
  // The override's figure wins over NVML's.
  s.override_yaml += "peer_link_bandwidth: 3.7e11\n";
  ASSERT_EQ(BuildNode(s, &node), "");
  EXPECT_DOUBLE_EQ(node.topology.Bandwidth(node.gpus[0].place, node.gpus[1].place), 3.7e11);
  EXPECT_EQ(node.provenance.peer_link, "yaml");
}

TEST_F(NvmlLinksTest, ShouldFallBackToDefaultsInBuildNodeWithoutNvml) {
  NodeSources s;
  s.override_yaml = "host_numa_bytes: [64GiB]\n";
  s.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  s.gpus = {GpuReport{kA, 0, 0, 1ull << 30, {kB}}, GpuReport{kB, 1, 0, 1ull << 30, {kA}}};
  Node node;
  ASSERT_EQ(BuildNode(s, &node), "");
  EXPECT_DOUBLE_EQ(node.topology.Bandwidth(node.gpus[0].place, node.gpus[1].place), 2.5e10);
  EXPECT_EQ(node.provenance.peer_link, "defaults");
  EXPECT_EQ(node.provenance.nvml.rfind("cannot load", 0), 0u);
}

}  // namespace
}  // namespace chameleon::topology
