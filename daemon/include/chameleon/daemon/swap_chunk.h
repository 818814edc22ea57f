// The shim executor's unit of device memory, as the daemon plans with it: every swappable
// allocation is served in whole chunks (docs/executor.md), so a swap frees, and a peer buffer
// holding its copy takes, its bytes rounded up to a chunk. The shim does not report its chunk
// size yet (CHAMELEON_SWAP_CHUNK_BYTES); its default is the VMM granularity.
#pragma once

#include <cstdint>

namespace chameleon::daemon {

inline constexpr std::uint64_t kShimChunkBytes = 2ull << 20;
/// From this device limit on, plans keep four chunks free rather than two.
inline constexpr std::uint64_t kLargeLimitBytes = 1ull << 30;

/// Bytes a swapped allocation of `bytes` occupies wherever its copy goes: whole chunks.
constexpr std::uint64_t SwapSpan(std::uint64_t bytes) {
  return (bytes + kShimChunkBytes - 1) / kShimChunkBytes * kShimChunkBytes;
}

/// The device memory a plan leaves free when the configuration names no reserve: none up to 8
/// chunks (a limit that small has no room to spare), two chunks, and from kLargeLimitBytes on
/// four (docs/policy.md, "Reserve": what the executor needs beyond the profile, measured). The
/// starting point only: a chosen plan that still evicts in steady state is planned again with
/// a larger one (ReserveFeedback), so the default need not cover the worst run.
constexpr std::uint64_t DefaultReserveBytes(std::uint64_t limit_bytes, std::uint64_t chunk_bytes) {
  if (limit_bytes <= 8 * chunk_bytes) return 0;
  if (limit_bytes < kLargeLimitBytes) return 2 * chunk_bytes;
  return 4 * chunk_bytes;
}

}  // namespace chameleon::daemon
