// The shim executor's unit of device memory, as the daemon plans with it: every swappable
// allocation is served in whole chunks (docs/executor.md), so a swap frees, and a peer buffer
// holding its copy takes, its bytes rounded up to a chunk. The shim does not report its chunk
// size yet (CHAMELEON_SWAP_CHUNK_BYTES); its default is the VMM granularity.
#pragma once

#include <cstdint>

namespace chameleon::daemon {

inline constexpr std::uint64_t kShimChunkBytes = 2ull << 20;

/// Bytes a swapped allocation of `bytes` occupies wherever its copy goes: whole chunks.
constexpr std::uint64_t SwapSpan(std::uint64_t bytes) {
  return (bytes + kShimChunkBytes - 1) / kShimChunkBytes * kShimChunkBytes;
}

}  // namespace chameleon::daemon
