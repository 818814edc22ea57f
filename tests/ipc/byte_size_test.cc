// The one byte-size grammar (chameleon/ipc/byte_size.h): every accepted and rejected form in one
// table. The shim's environment, simgpu's and the daemon's YAML all call this parser, so these
// cases are the whole specification of what a size string means anywhere in Chameleon.
#include "chameleon/ipc/byte_size.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>

namespace chameleon::ipc {
namespace {

constexpr std::uint64_t kKi = 1ull << 10, kMi = 1ull << 20, kGi = 1ull << 30, kTi = 1ull << 40;

struct Accepted {
  std::string_view text;
  std::uint64_t bytes;
};

TEST(ByteSizeTest, AcceptsPlainBytesDecimalAndBinaryUnits) {
  const Accepted cases[] = {
      // Plain bytes, and the explicit B.
      {"0", 0},
      {"48097409", 48097409},
      {"512B", 512},
      {"18446744073709551615", UINT64_MAX},
      // Decimal units: powers of 1000; kilo in either case, the others upper case; B optional.
      {"64k", 64'000},
      {"64K", 64'000},
      {"64kB", 64'000},
      {"64KB", 64'000},
      {"512M", 512'000'000},
      {"512MB", 512'000'000},
      {"16G", 16'000'000'000},
      {"16GB", 16'000'000'000},
      {"2T", 2'000'000'000'000},
      {"2TB", 2'000'000'000'000},
      // Binary units: powers of 1024, always with "iB".
      {"64KiB", 64 * kKi},
      {"512MiB", 512 * kMi},
      {"16GiB", 16 * kGi},
      {"2TiB", 2 * kTi},
      // Fractions, rounded to the nearest byte.
      {"1.5GiB", 3 * kGi / 2},
      {"0.5kB", 500},
      {"1.0005kB", 1001},  // 1000.5 rounds up
      {"0.1KiB", 102},     // 102.4 rounds down
      {"2.25 TB", 2'250'000'000'000},
      // Whitespace: around the whole, and between the number and its unit.
      {"  8GiB ", 8 * kGi},
      {"\t8 GiB\t", 8 * kGi},
      {"8   G", 8'000'000'000},
      // The largest values that still fit.
      {"16777215TiB", 16777215 * kTi},
      {"18446744073709551615B", UINT64_MAX},
  };
  for (const Accepted& c : cases) {
    const ByteSize r = ParseByteSize(c.text);
    EXPECT_TRUE(r) << "'" << c.text << "': " << (r.error ? r.error : "");
    EXPECT_EQ(r.bytes, c.bytes) << "'" << c.text << "'";
  }
}

struct Rejected {
  std::string_view text;
  std::string_view why;  // the start of the reason
};

TEST(ByteSizeTest, RejectsGarbageSignsOverflowAndWrongCaseWithAReason) {
  const Rejected cases[] = {
      {"", "empty"},
      {"   ", "empty"},
      {"G", "no digits"},
      {"GiB", "no digits"},
      {"-1", "no digits"},
      {"+1", "no digits"},
      {".5G", "no digits"},
      {"1.G", "no digits after"},
      {"1.5", "a fraction of a byte"},
      {"1.5B", "a fraction of a byte"},
      {"0.1234567890123456789G", "more than 18"},
      // Case: m is milli, b is bits, and binary units need exactly "iB".
      {"8g", "unknown unit"},
      {"8m", "unknown unit"},
      {"8t", "unknown unit"},
      {"8Gb", "unknown unit"},
      {"8gib", "unknown unit"},
      {"8GIB", "unknown unit"},
      {"8kiB", "unknown unit"},
      {"8Gi", "unknown unit"},
      {"8GiBs", "unknown unit"},
      {"64XB", "unknown unit"},
      {"8 G B", "unknown unit"},
      {"1,000", "unknown unit"},
      {"1e9", "unknown unit"},
      {"0x10", "unknown unit"},
      {"8PB", "unknown unit"},
      // Overflow, in the digits and after scaling.
      {"18446744073709551616", "too large"},
      {"99999999999999999999999", "too large"},
      {"16777216TiB", "too large"},
      {"18446744073709551616B", "too large"},
      {"18446745TB", "too large"},
  };
  for (const Rejected& c : cases) {
    const ByteSize r = ParseByteSize(c.text);
    ASSERT_FALSE(r) << "'" << c.text << "' gave " << r.bytes;
    EXPECT_EQ(std::string_view(r.error).substr(0, c.why.size()), c.why) << "'" << c.text << "'";
  }
}

}  // namespace
}  // namespace chameleon::ipc
