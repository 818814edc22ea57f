// The lightweight profiler's comparison of adjacent iterations.
//
// An iteration is reduced to the count vector of its token bigrams (pairs of consecutive op
// tokens, the first op paired with a start marker) and two iterations are compared by the cosine
// of their vectors. Bigrams keep local order (a reordering changes the vector, unigram counts
// would not see it) while staying robust to insertions (one inserted op changes at most three
// bigrams; a positional comparison would shift every op after it). docs/detection.md says more.
//
// IterationComparator maintains the dot product and both norms incrementally, so finishing an
// iteration costs O(1) whatever its length: each op costs two hash-table probes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace chameleon::daemon {

/// Token that precedes the first op of an iteration in its first bigram.
inline constexpr std::uint32_t kIterationStartToken = 0xffffffffu;

/// Count table of bigram keys: open addressing, cleared in O(1) by an epoch stamp.
/// Not thread-safe.
class BigramCounts {
 public:
  explicit BigramCounts(std::size_t initial_capacity = 1024);
  /// Adds one occurrence of `key`; returns its new count.
  std::uint32_t Increment(std::uint64_t key);
  /// Count of `key` (0 when absent).
  std::uint32_t Get(std::uint64_t key) const;
  /// Forgets every key without touching the table (amortised O(1)).
  void Clear();
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t key;
    std::uint32_t count;
    std::uint32_t epoch;  // slot is occupied only when equal to epoch_
  };
  std::size_t SlotIndex(std::uint64_t key) const;
  void Grow();

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::uint32_t epoch_ = 1;
  std::size_t size_ = 0;
};

/// Bigram key of two consecutive tokens.
constexpr std::uint64_t BigramKey(std::uint32_t previous, std::uint32_t token) {
  return (static_cast<std::uint64_t>(previous) << 32) | token;
}

/// Thresholds of a stable step.
struct StabilityThresholds {
  double similarity = 0.95;     ///< cosine strictly above
  double length_change = 0.05;  ///< relative length change strictly below
};

/// Outcome of comparing an iteration with the one before it.
struct IterationComparison {
  bool has_previous = false;  ///< false for the first iteration (nothing to compare with)
  double similarity = 0;      ///< cosine of the bigram count vectors, in [0, 1]
  std::uint64_t previous_ops = 0;
  std::uint64_t ops = 0;
  double length_change = 0;  ///< |ops - previous_ops| / previous_ops
  bool stable = false;
};

/// Incremental comparison of each iteration with the previous one. Not thread-safe.
class IterationComparator {
 public:
  /// Adds the next op of the current iteration.
  void Add(std::uint32_t token) {
    const std::uint64_t key = BigramKey(last_, token);
    last_ = token;
    const std::uint64_t count = current_.Increment(key);
    // (c+1)^2 - c^2 = 2c + 1 with c the count before this op.
    current_norm_ += 2 * count - 1;
    dot_ += previous_.Get(key);
    ++current_ops_;
  }
  /// Ends the current iteration, compares it with the previous one and makes it the previous.
  IterationComparison Finish(const StabilityThresholds& thresholds);
  /// Drops the current iteration; the next one is compared with the same previous one.
  void DiscardCurrent();
  /// Forgets everything (the next iteration has nothing to compare with).
  void Reset();
  std::uint64_t current_ops() const { return current_ops_; }
  std::uint64_t previous_ops() const { return previous_ops_; }

 private:
  BigramCounts previous_;
  BigramCounts current_;
  std::uint64_t previous_norm_ = 0;  // squared norm of the previous vector
  std::uint64_t current_norm_ = 0;
  std::uint64_t dot_ = 0;
  std::uint64_t previous_ops_ = 0;
  std::uint64_t current_ops_ = 0;
  std::uint32_t last_ = kIterationStartToken;
  bool has_previous_ = false;
};

/// Compares two whole iterations from scratch (reference for tests and the benchmark baseline).
IterationComparison CompareIterations(std::span<const std::uint32_t> previous,
                                      std::span<const std::uint32_t> current,
                                      const StabilityThresholds& thresholds);

/// Applies the thresholds to a similarity and two lengths.
IterationComparison Judge(double similarity, std::uint64_t previous_ops, std::uint64_t ops,
                          const StabilityThresholds& thresholds);

}  // namespace chameleon::daemon
