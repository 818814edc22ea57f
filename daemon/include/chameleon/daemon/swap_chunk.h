// The shim executor's unit of device memory, as the daemon plans with it: every swappable
// allocation is served in whole chunks (docs/executor.md), so a swap frees, and a peer buffer
// holding its copy takes, its bytes rounded up to a chunk. The shim does not report its chunk
// size yet (CHAMELEON_SWAP_CHUNK_BYTES); its default is the VMM granularity.
#pragma once

#include <cstdint>

namespace chameleon::daemon {

inline constexpr std::uint64_t kShimChunkBytes = 2ull << 20;
/// From this device limit on, plans keep four chunks or 1 % of the limit free rather than two
/// chunks.
inline constexpr std::uint64_t kLargeLimitBytes = 1ull << 30;

/// Bytes a swapped allocation of `bytes` occupies wherever its copy goes: whole chunks.
constexpr std::uint64_t SwapSpan(std::uint64_t bytes) {
  return (bytes + kShimChunkBytes - 1) / kShimChunkBytes * kShimChunkBytes;
}

/// The device memory a plan leaves free when the configuration names no reserve: none up to 8
/// chunks (a limit that small has no room to spare), two chunks, and from kLargeLimitBytes on
/// four chunks or 1 % of the limit in whole chunks, whichever is more (docs/policy.md,
/// "Reserve": what the executor needs beyond the profile, measured; at LLM scale a few chunks
/// left one eviction a step in some runs).
constexpr std::uint64_t DefaultReserveBytes(std::uint64_t limit_bytes, std::uint64_t chunk_bytes) {
  if (limit_bytes <= 8 * chunk_bytes) return 0;
  if (limit_bytes < kLargeLimitBytes) return 2 * chunk_bytes;
  const std::uint64_t percent = (limit_bytes / 100 + chunk_bytes - 1) / chunk_bytes * chunk_bytes;
  return percent > 4 * chunk_bytes ? percent : 4 * chunk_bytes;
}

}  // namespace chameleon::daemon
