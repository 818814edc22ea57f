// FNV-1a, 64-bit, over the little-endian bytes of integer words: the one hash the policy's tensor
// matcher (match keys) and the daemon's op-sequence keys (SequenceKey) share. Cheap and the same
// in every process and run; not meant for input chosen to collide.
#pragma once

#include <cstdint>

namespace chameleon::policy {

inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;
inline constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ull;

/// `hash` continued over the low `bytes` bytes of `value`, least significant first.
constexpr std::uint64_t Fnv1a(std::uint64_t hash, std::uint64_t value, int bytes = 8) {
  for (int i = 0; i < bytes; ++i) {
    hash ^= (value >> (8 * i)) & 0xffu;
    hash *= kFnv1aPrime;
  }
  return hash;
}

}  // namespace chameleon::policy
