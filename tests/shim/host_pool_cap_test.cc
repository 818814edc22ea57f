// The pinned host pool's cap: CHAMELEON_HOST_POOL_BYTES, else half the host memory the topology
// states (CHAMELEON_TOPOLOGY, then sysfs), resolved from the shim's own Config.
#include "host_pool_cap.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config.h"

namespace chameleon::shim {
namespace {

namespace fs = std::filesystem;

class HostPoolCapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("host_pool_cap_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "sys" / "node0");
    // This "machine" has 32 GiB in sysfs, so a cap of 1 TiB can only come from the YAML.
    std::ofstream(dir_ / "sys" / "node0" / "meminfo") << "Node 0 MemTotal: 33554432 kB\n";
    yaml_ = (dir_ / "h200.yaml").string();
    std::ofstream(yaml_) << "machine: h200-sxm\nhost_numa_bytes: [1TiB, 1TiB]\n";
  }
  void TearDown() override {
    unsetenv("CHAMELEON_TOPOLOGY");
    unsetenv("CHAMELEON_HOST_POOL_BYTES");
    fs::remove_all(dir_);
  }
  // The cap the executor would use for the current environment.
  HostPoolCap FromEnvironment() {
    const Config c = LoadConfig();
    topology::HostMemoryOptions where;
    where.topology_path = c.topology_path;
    where.sysfs_node_root = (dir_ / "sys").string();
    return ResolveHostPoolCap(c.host_pool_bytes, where);
  }
  fs::path dir_;
  std::string yaml_;
};

TEST_F(HostPoolCapTest, ShouldBeHalfOfTheTopologyFilesHostMemory) {
  setenv("CHAMELEON_TOPOLOGY", yaml_.c_str(), 1);
  const HostPoolCap cap = FromEnvironment();
  EXPECT_EQ(cap.bytes, 1ull << 40);  // half of 2 x 1 TiB
  EXPECT_STREQ(cap.source, "topology file");
  EXPECT_TRUE(cap.warning.empty());
}

TEST_F(HostPoolCapTest, ShouldBeHalfOfSysfsWithoutATopologyFile) {
  const HostPoolCap cap = FromEnvironment();
  EXPECT_EQ(cap.bytes, 16ull << 30);
  EXPECT_STREQ(cap.source, "sysfs");
}

TEST_F(HostPoolCapTest, ShouldPreferTheExplicitVariable) {
  setenv("CHAMELEON_TOPOLOGY", yaml_.c_str(), 1);
  setenv("CHAMELEON_HOST_POOL_BYTES", "3GiB", 1);
  const HostPoolCap cap = FromEnvironment();
  EXPECT_EQ(cap.bytes, 3ull << 30);
  EXPECT_STREQ(cap.source, "CHAMELEON_HOST_POOL_BYTES");
}

TEST_F(HostPoolCapTest, ShouldWarnAndUseSysfsWhenTheTopologyFileIsUnusable) {
  std::ofstream(yaml_) << "host_numa_bytes: [1TiB, nonsense]\n";
  setenv("CHAMELEON_TOPOLOGY", yaml_.c_str(), 1);
  const HostPoolCap cap = FromEnvironment();
  EXPECT_EQ(cap.bytes, 16ull << 30);
  EXPECT_STREQ(cap.source, "sysfs");
  EXPECT_FALSE(cap.warning.empty());
}

}  // namespace
}  // namespace chameleon::shim
