// PyTorch's CUDA caching-allocator size classes (c10/cuda/CUDACachingAllocator.cpp), which both
// the caching and the expandable style follow so the driver sees the same traffic PyTorch makes.
#pragma once

#include <cstddef>

namespace chameleon::train_sim::size_classes {

inline constexpr std::size_t kMinBlock = 512;            ///< every block is a multiple of this
inline constexpr std::size_t kSmallRequest = 1 << 20;    ///< <= 1 MiB goes to the small pool
inline constexpr std::size_t kSmallSegment = 2 << 20;    ///< small pool segment / page size
inline constexpr std::size_t kLargeSegment = 20 << 20;   ///< segment for 1-10 MiB requests
inline constexpr std::size_t kMinLargeAlloc = 10 << 20;  ///< above: exact size, 2 MiB rounded
inline constexpr std::size_t kRoundLarge = 2 << 20;

inline std::size_t RoundUp(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

/// Block size for a request.
inline std::size_t RoundRequest(std::size_t bytes) {
  return bytes < kMinBlock ? kMinBlock : RoundUp(bytes, kMinBlock);
}

inline bool IsSmall(std::size_t rounded) { return rounded <= kSmallRequest; }

/// Bytes of a new segment that must hold a `rounded` block.
inline std::size_t SegmentBytes(std::size_t rounded) {
  if (IsSmall(rounded)) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return RoundUp(rounded, kRoundLarge);
}

/// Smallest remainder worth splitting off a free block (small pool: any; large: > 1 MiB).
inline std::size_t MinSplit(bool small) { return small ? kMinBlock : kSmallRequest + 1; }

}  // namespace chameleon::train_sim::size_classes
