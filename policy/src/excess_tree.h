// Internal: a segment tree over per-op memory excess (bytes in use - limit) with range add,
// global max and "last op with positive excess in a range", so the simulator updates the MRL
// in O(log ops) per swap instead of walking every op of a lifetime.
#pragma once

#include <cstdint>
#include <vector>

namespace chameleon::policy::detail {

/// Not thread-safe (mutable state); one per generation.
class ExcessTree {
 public:
  explicit ExcessTree(const std::vector<std::int64_t>& values);

  /// Adds `delta` to every op in [first, last].
  void Add(std::uint32_t first, std::uint32_t last, std::int64_t delta);
  /// Largest excess over all ops.
  std::int64_t Max() const { return max_[1]; }
  /// The last op in [first, last] whose excess is > 0, or -1.
  std::int64_t LastPositive(std::uint32_t first, std::uint32_t last) const;
  /// The first op in [first, last] whose excess is > 0, or -1.
  std::int64_t FirstPositive(std::uint32_t first, std::uint32_t last) const;

 private:
  void Build(const std::vector<std::int64_t>& values, std::size_t node, std::uint32_t lo,
             std::uint32_t hi);
  void AddAt(std::size_t node, std::uint32_t lo, std::uint32_t hi);
  std::int64_t FindAt(std::size_t node, std::uint32_t lo, std::uint32_t hi, std::int64_t above,
                      bool last) const;

  std::uint32_t size_;
  std::vector<std::int64_t> max_;  ///< max of the subtree, including this node's pending add
  std::vector<std::int64_t> add_;  ///< added to the whole subtree
  // Arguments of the running Add/LastPositive (kept here to keep the recursion lean).
  std::uint32_t first_ = 0;
  std::uint32_t last_ = 0;
  std::int64_t delta_ = 0;
  mutable std::uint32_t query_first_ = 0;
  mutable std::uint32_t query_last_ = 0;
};

}  // namespace chameleon::policy::detail
