// Byte sizes in the shim's environment (CHAMELEON_DEVICE_LIMIT and the executor's knobs): the one
// grammar of chameleon/ipc/byte_size.h (its every case is in tests/ipc/byte_size_test.cc), plus
// the shim's own rule that a size must be positive.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "config.h"

namespace chameleon::shim {
namespace {

std::uint64_t Bytes(const char* text) {
  std::uint64_t v = 0;
  return ParsePositiveByteSize(text, &v) ? v : 0;
}

TEST(ParsePositiveByteSizeTest, AcceptsPlainNumbersDecimalAndBinaryUnits) {
  EXPECT_EQ(Bytes("48097409"), 48097409u);
  EXPECT_EQ(Bytes("64KiB"), 64u << 10);
  EXPECT_EQ(Bytes("512MiB"), 512u << 20);
  EXPECT_EQ(Bytes("8GiB"), 8ull << 30);
  EXPECT_EQ(Bytes("2TiB"), 2ull << 40);
  // Without "i" a unit is decimal, as in simgpu and the daemon's YAML.
  EXPECT_EQ(Bytes("64K"), 64'000u);
  EXPECT_EQ(Bytes("512M"), 512'000'000u);
  EXPECT_EQ(Bytes("8G"), 8'000'000'000u);
  EXPECT_EQ(Bytes("8GB"), 8'000'000'000u);
  EXPECT_EQ(Bytes("1.5G"), 1'500'000'000u);
  EXPECT_EQ(Bytes("8 G"), 8'000'000'000u);
  EXPECT_EQ(Bytes("2T"), 2'000'000'000'000u);
}

TEST(ParsePositiveByteSizeTest, RejectsZeroAndEverythingTheGrammarRejects) {
  std::uint64_t v = 7;
  for (const char* bad : {"", "0", "0G", "0GiB", "G", "-1", "8g", "8Gi", "8GiBs", "64XB",
                          "18446744073709551616", "17179869184GiB", "99999999999999999999T"}) {
    EXPECT_FALSE(ParsePositiveByteSize(bad, &v)) << bad;
  }
  EXPECT_FALSE(ParsePositiveByteSize(nullptr, &v));
  EXPECT_EQ(v, 7u);  // untouched on failure
}

// The value a daemon configuration would write (memory_limit: 16GB) means the same in the shim.
TEST(LoadConfigTest, ReadsTheDeviceLimitAndExecutorSizesByTheSharedGrammar) {
  setenv("CHAMELEON_DEVICE_LIMIT", "16GB", 1);
  setenv("CHAMELEON_SWAP_MIN_BYTES", "64KiB", 1);
  setenv("CHAMELEON_HOST_POOL_BYTES", "1.5 GiB", 1);
  setenv("CHAMELEON_SWAP_CHUNK_BYTES", "0", 1);  // rejected: the default stays
  setenv("CHAMELEON_LOG_LEVEL", "off", 1);
  const Config c = LoadConfig();
  unsetenv("CHAMELEON_DEVICE_LIMIT");
  unsetenv("CHAMELEON_SWAP_MIN_BYTES");
  unsetenv("CHAMELEON_HOST_POOL_BYTES");
  unsetenv("CHAMELEON_SWAP_CHUNK_BYTES");
  unsetenv("CHAMELEON_LOG_LEVEL");
  EXPECT_EQ(c.device_limit_bytes, 16'000'000'000u);
  EXPECT_EQ(c.swap_min_bytes, 64u << 10);
  EXPECT_EQ(c.host_pool_bytes, 3ull << 29);
  EXPECT_EQ(c.swap_chunk_bytes, Config{}.swap_chunk_bytes);
}

bool ClosestSizeWith(const char* value) {
  setenv("CHAMELEON_EVICTION", value, 1);
  setenv("CHAMELEON_LOG_LEVEL", "off", 1);
  const Config c = LoadConfig();
  unsetenv("CHAMELEON_EVICTION");
  unsetenv("CHAMELEON_LOG_LEVEL");
  return c.eviction_closest_size;
}

TEST(LoadConfigTest, EvictionRuleIsBeladyUnlessClosestSizeIsNamedExactly) {
  EXPECT_FALSE(Config{}.eviction_closest_size);  // the default: farthest next use
  EXPECT_TRUE(ClosestSizeWith("closest-size"));
  EXPECT_FALSE(ClosestSizeWith("belady"));
  // Anything else is reported and replaced by the default.
  for (const char* bad : {"", "closest", "Closest-Size", "belady ", "lru", "1"}) {
    EXPECT_FALSE(ClosestSizeWith(bad)) << bad;
  }
}

bool PlacementHostWith(const char* value) {
  setenv("CHAMELEON_PLACEMENT", value, 1);
  setenv("CHAMELEON_LOG_LEVEL", "off", 1);
  const bool host = LoadConfig().placement_host;
  unsetenv("CHAMELEON_PLACEMENT");
  unsetenv("CHAMELEON_LOG_LEVEL");
  return host;
}

TEST(LoadConfigTest, PlacementIsAutoUnlessHostIsNamedExactly) {
  EXPECT_FALSE(Config{}.placement_host);  // the default: the policy's tiers within its leases
  EXPECT_FALSE(LoadConfig().placement_host);
  EXPECT_TRUE(PlacementHostWith("host"));
  EXPECT_FALSE(PlacementHostWith("auto"));
  // Anything else is reported and replaced by the default.
  for (const char* bad : {"", "Host", "host ", "peer", "numa", "0", "1"}) {
    EXPECT_FALSE(PlacementHostWith(bad)) << bad;
  }
}

}  // namespace
}  // namespace chameleon::shim
