#include "chameleon/ipc/byte_size.h"

#include <cstddef>

namespace chameleon::ipc {
namespace {

struct Unit {
  std::string_view name;
  std::uint64_t scale;
};

// Every accepted unit, exactly as written (byte_size.h states the case rules).
constexpr Unit kUnits[] = {
    {"", 1},
    {"B", 1},
    {"k", 1000},
    {"K", 1000},
    {"kB", 1000},
    {"KB", 1000},
    {"M", 1000'000},
    {"MB", 1000'000},
    {"G", 1000'000'000},
    {"GB", 1000'000'000},
    {"T", 1000'000'000'000},
    {"TB", 1000'000'000'000},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
};

// 10^18 < 2^64: eighteen fraction digits fit one u64 exactly.
constexpr std::size_t kMaxFractionDigits = 18;

bool IsSpace(char c) { return c == ' ' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

ByteSize Fail(const char* why) { return {0, why}; }

}  // namespace

ByteSize ParseByteSize(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return Fail("empty");
  std::size_t i = 0;
  // The integer part, in 128 bits so that overflow is one comparison at the end.
  unsigned __int128 whole = 0;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > UINT64_MAX) return Fail("too large (more than 2^64 - 1 bytes)");
  }
  if (i == 0) return Fail("no digits before the unit (signs are not accepted)");
  std::uint64_t fraction = 0, denominator = 1;
  if (i < text.size() && text[i] == '.') {
    const std::size_t first = ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i) {
      if (i - first == kMaxFractionDigits) return Fail("more than 18 fraction digits");
      fraction = fraction * 10 + static_cast<unsigned>(text[i] - '0');
      denominator *= 10;
    }
    if (i == first) return Fail("no digits after the decimal point");
  }
  while (i < text.size() && IsSpace(text[i])) ++i;
  const std::string_view unit = text.substr(i);
  for (const Unit& u : kUnits) {
    if (u.name != unit) continue;
    if (u.scale == 1 && denominator > 1) return Fail("a fraction of a byte (give a unit)");
    // Nearest byte: (fraction * scale + denominator / 2) / denominator, all below 2^128.
    const unsigned __int128 part =
        (static_cast<unsigned __int128>(fraction) * u.scale + denominator / 2) / denominator;
    const unsigned __int128 bytes = whole * u.scale + part;
    if (bytes > UINT64_MAX) return Fail("too large (more than 2^64 - 1 bytes)");
    return {static_cast<std::uint64_t>(bytes), nullptr};
  }
  return Fail("unknown unit");
}

}  // namespace chameleon::ipc
