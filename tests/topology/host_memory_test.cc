// The host-memory reader: the machine YAML's host_numa_bytes, a fake sysfs node tree, and the
// resolution order between them (topology/host_memory.h).
#include "chameleon/topology/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace chameleon::topology {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kTiB = 1ull << 40;

class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("host_memory_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "sys");
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A sysfs node folder as the kernel writes it (drivers/base/node.c: "Node %d MemTotal: %8lu kB").
  void Node(int n, std::uint64_t kib) {
    const fs::path d = dir_ / "sys" / ("node" + std::to_string(n));
    fs::create_directories(d);
    std::ofstream(d / "meminfo") << "Node " << n << " MemTotal:       " << kib << " kB\n"
                                 << "Node " << n << " MemFree:        1024 kB\n";
  }
  std::string File(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  HostMemoryOptions Options(const std::string& yaml_path = "") {
    HostMemoryOptions o;
    o.topology_path = yaml_path;
    o.sysfs_node_root = (dir_ / "sys").string();
    return o;
  }
  fs::path dir_;
};

std::vector<std::uint64_t> Parse(const std::string& yaml, std::string* error = nullptr) {
  std::vector<std::uint64_t> out;
  bool present = false;
  const std::string e = ParseHostNumaBytes(yaml, &out, &present);
  if (error) *error = e;
  return out;
}

TEST(ParseHostNumaBytesTest, ShouldReadAFlowListOfByteSizes) {
  EXPECT_EQ(Parse("machine: h200-sxm\nhost_numa_bytes: [1TiB, \"512GiB\", 2G]  # per socket\n"),
            (std::vector<std::uint64_t>{kTiB, 512 * kGiB, 2'000'000'000ull}));
}

TEST(ParseHostNumaBytesTest, ShouldReadABlockListAtEitherIndentation) {
  EXPECT_EQ(Parse("host_numa_bytes:\n  - 1TiB\n\n  # second socket\n  - 1TiB\nnext: 1\n"),
            (std::vector<std::uint64_t>{kTiB, kTiB}));
  EXPECT_EQ(Parse("host_numa_bytes:\n- 64GiB\nnext: 1\n"), (std::vector<std::uint64_t>{64 * kGiB}));
}

TEST(ParseHostNumaBytesTest, ShouldReportAbsenceWithoutError) {
  std::vector<std::uint64_t> out{7};
  bool present = true;
  EXPECT_EQ(ParseHostNumaBytes("host_numa_bytes_old: [1TiB]\nmachine: x\n", &out, &present), "");
  EXPECT_FALSE(present);
  EXPECT_EQ(out, std::vector<std::uint64_t>{7});
}

TEST(ParseHostNumaBytesTest, ShouldRejectWhatItCannotReadExactly) {
  for (const char* bad :
       {"host_numa_bytes: 1TiB\n", "host_numa_bytes: [1TiB, 0]\n",
        "host_numa_bytes: [1TiB, lots]\n", "host_numa_bytes: []\n", "host_numa_bytes: {a: 1}\n",
        "host_numa_bytes:\n  a: 1TiB\n", "host_numa_bytes:\nnext: 1\n",
        "host_numa_bytes: [1TiB]\nhost_numa_bytes: [2TiB]\n"}) {
    std::string error;
    Parse(bad, &error);
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST_F(HostMemoryTest, ShouldPreferTheTopologyFile) {
  Node(0, 16 << 20);
  const HostMemory h = ReadHostMemory(Options(File("m.yaml", "host_numa_bytes: [1TiB, 1TiB]\n")));
  EXPECT_EQ(h.source, HostMemorySource::kTopologyFile);
  EXPECT_EQ(h.numa_bytes, (std::vector<std::uint64_t>{kTiB, kTiB}));
  EXPECT_EQ(h.total(), 2 * kTiB);
  EXPECT_TRUE(h.warning.empty());
}

TEST_F(HostMemoryTest, ShouldReadEveryNodeOfSysfs) {
  Node(0, 16 << 20);  // 16 GiB in kB
  Node(1, 8 << 20);
  const HostMemory h = ReadHostMemory(Options());
  EXPECT_EQ(h.source, HostMemorySource::kSysfs);
  EXPECT_EQ(h.numa_bytes, (std::vector<std::uint64_t>{16 * kGiB, 8 * kGiB}));
  EXPECT_TRUE(h.warning.empty());
}

TEST_F(HostMemoryTest, ShouldFallBackToSysfsWithAWarningWhenTheFileIsBad) {
  Node(0, 4 << 20);
  for (const std::string& path :
       {File("bad.yaml", "host_numa_bytes: [huge]\n"), File("none.yaml", "machine: h200-sxm\n"),
        (dir_ / "missing.yaml").string()}) {
    const HostMemory h = ReadHostMemory(Options(path));
    EXPECT_EQ(h.source, HostMemorySource::kSysfs) << path;
    EXPECT_EQ(h.total(), 4 * kGiB);
    EXPECT_NE(h.warning.find(path), std::string::npos) << h.warning;
  }
}

TEST_F(HostMemoryTest, ShouldFallBackToPhysicalRamWithAWarningWithoutSysfs) {
  const HostMemory h = ReadHostMemory(Options());
  EXPECT_EQ(h.source, HostMemorySource::kPhysicalRam);
  ASSERT_EQ(h.numa_bytes.size(), 1u);
  const auto ram = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                   static_cast<std::uint64_t>(::sysconf(_SC_PAGE_SIZE));
  EXPECT_EQ(h.total(), ram);
  EXPECT_FALSE(h.warning.empty());
}

TEST_F(HostMemoryTest, ShouldRejectAMalformedSysfsNode) {
  Node(0, 4 << 20);
  fs::create_directories(dir_ / "sys" / "node1");
  std::ofstream(dir_ / "sys" / "node1" / "meminfo") << "Node 1 MemTotal: many\n";
  std::vector<std::uint64_t> out;
  EXPECT_FALSE(ReadSysfsNodeMemory((dir_ / "sys").string(), &out).empty());
  EXPECT_EQ(ReadHostMemory(Options()).source, HostMemorySource::kPhysicalRam);
}

TEST_F(HostMemoryTest, ShouldReadTheShippedMachineFiles) {
  const HostMemory h200 = ReadHostMemory(Options(MACHINES_DIR "/h200-sxm.yaml"));
  EXPECT_EQ(h200.source, HostMemorySource::kTopologyFile);
  EXPECT_EQ(h200.numa_bytes, (std::vector<std::uint64_t>{kTiB, kTiB}));
  const HostMemory a100 = ReadHostMemory(Options(MACHINES_DIR "/a100-pcie4.yaml"));
  EXPECT_EQ(a100.numa_bytes, (std::vector<std::uint64_t>{512 * kGiB, 512 * kGiB}));
}

}  // namespace
}  // namespace chameleon::topology
