// A small seeded generator whose sequence is the same on every platform and standard library
// (std::uniform_int_distribution is not), so searches are reproducible from a seed.
// Not thread-safe: one per search.
#pragma once

#include <cstdint>

namespace chameleon::topology {

/// SplitMix64 (Steele, Lea, Flood 2014): passes BigCrush, one add and three mixes per draw.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) for n > 0 (Lemire's multiply-high; bias < n / 2^64).
  std::uint64_t Below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  int Index(std::size_t n) { return static_cast<int>(Below(n)); }
  /// Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

}  // namespace chameleon::topology
