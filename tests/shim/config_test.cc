// Byte sizes in the shim's environment (CHAMELEON_DEVICE_LIMIT and the executor's knobs).
#include <gtest/gtest.h>

#include "config.h"

namespace chameleon::shim {
namespace {

std::uint64_t Bytes(const char* text) {
  std::uint64_t v = 0;
  return ParseByteSize(text, &v) ? v : 0;
}

TEST(ParseByteSizeTest, AcceptsPlainNumbersAndBinarySuffixes) {
  EXPECT_EQ(Bytes("48097409"), 48097409u);
  EXPECT_EQ(Bytes("64K"), 64u << 10);
  EXPECT_EQ(Bytes("64KiB"), 64u << 10);
  EXPECT_EQ(Bytes("512M"), 512u << 20);
  EXPECT_EQ(Bytes("512MiB"), 512u << 20);
  EXPECT_EQ(Bytes("8G"), 8ull << 30);
  EXPECT_EQ(Bytes("8GiB"), 8ull << 30);
  EXPECT_EQ(Bytes("2T"), 2ull << 40);
  EXPECT_EQ(Bytes("2TiB"), 2ull << 40);
}

TEST(ParseByteSizeTest, RejectsEverythingElse) {
  std::uint64_t v = 7;
  for (const char* bad :
       {"", "0", "0G", "G", "-1", "1.5G", "8g", "8GB", "8 G", "8Gi", "8GiBs", "64XB",
        "18446744073709551616", "17179869184G", "99999999999999999999T"}) {
    EXPECT_FALSE(ParseByteSize(bad, &v)) << bad;
  }
  EXPECT_FALSE(ParseByteSize(nullptr, &v));
  EXPECT_EQ(v, 7u);  // untouched on failure
}

}  // namespace
}  // namespace chameleon::shim
