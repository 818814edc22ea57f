// The one grammar for byte sizes, shared by everything a person types a size into: the shim's
// environment (CHAMELEON_DEVICE_LIMIT, CHAMELEON_*_BYTES), simgpu's (SIMGPU_MEMORY) and the
// daemon's YAML (memory_limit, *_bytes). A value copied from one into another means the same
// number of bytes. docs/protocol.md "Byte sizes" is the user-facing statement of the same rules.
//
// Grammar (after trimming leading and trailing spaces and tabs):
//   size   := digits [ "." digits ] [ spaces ] unit
//   unit   := "" | "B"                              (bytes; no fraction allowed)
//           | "k" | "K" | "kB" | "KB"               (10^3)
//           | "M" | "MB" | "G" | "GB" | "T" | "TB"  (10^6, 10^9, 10^12)
//           | "KiB" | "MiB" | "GiB" | "TiB"         (2^10, 2^20, 2^30, 2^40)
// Case: unit letters are exactly as listed; only kilo takes either case (SI writes "k", custom
// writes "K"). Lower-case m, g, t are rejected (m is milli) and so is a lower-case b (bits). A
// fraction is rounded to the nearest byte (1.5GiB = 1610612736, 0.5kB = 500). Zero is a valid size
// here; callers that need a positive one say so. Rejected, with a reason: an empty string, a sign,
// no digits, more than 18 fraction digits, a fraction of plain bytes, an unknown unit, and any
// value above 2^64 - 1.
//
// Dependency-free and allocation-free: the shim calls it from its constructor-time configuration
// (no exceptions, no heap). Thread-safe (pure function).
#pragma once

#include <cstdint>
#include <string_view>

namespace chameleon::ipc {

/// Result of ParseByteSize: `bytes` when `error` is null, else `error` is a static, lower-case
/// reason ("unknown unit", ...) suitable after "expected a byte size: ".
struct ByteSize {
  std::uint64_t bytes = 0;
  const char* error = nullptr;

  explicit operator bool() const { return error == nullptr; }
};

/// Parses `text` by the grammar above.
ByteSize ParseByteSize(std::string_view text);

/// One line naming the accepted forms, for error messages in every caller.
inline constexpr const char* kByteSizeForms =
    "bytes, optionally with B, k/K, kB/KB, M(B), G(B), T(B) (powers of 1000) or KiB, MiB, GiB, "
    "TiB (powers of 1024), e.g. 8589934592, 8GiB, 512MB, 1.5GiB";

}  // namespace chameleon::ipc
