#include "excess_tree.h"

#include <algorithm>

namespace chameleon::policy::detail {

ExcessTree::ExcessTree(const std::vector<std::int64_t>& values)
    : size_(static_cast<std::uint32_t>(values.size())),
      max_(4 * std::max<std::size_t>(values.size(), 1), 0),
      add_(4 * std::max<std::size_t>(values.size(), 1), 0) {
  if (size_ > 0) Build(values, 1, 0, size_ - 1);
}

void ExcessTree::Build(const std::vector<std::int64_t>& values, std::size_t node, std::uint32_t lo,
                       std::uint32_t hi) {
  if (lo == hi) {
    max_[node] = values[lo];
    return;
  }
  const std::uint32_t mid = lo + (hi - lo) / 2;
  Build(values, 2 * node, lo, mid);
  Build(values, 2 * node + 1, mid + 1, hi);
  max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
}

void ExcessTree::Add(std::uint32_t first, std::uint32_t last, std::int64_t delta) {
  if (size_ == 0 || first > last || first >= size_) return;
  first_ = first;
  last_ = std::min(last, size_ - 1);
  delta_ = delta;
  AddAt(1, 0, size_ - 1);
}

void ExcessTree::AddAt(std::size_t node, std::uint32_t lo, std::uint32_t hi) {
  if (hi < first_ || lo > last_) return;
  if (first_ <= lo && hi <= last_) {
    max_[node] += delta_;
    add_[node] += delta_;
    return;
  }
  const std::uint32_t mid = lo + (hi - lo) / 2;
  AddAt(2 * node, lo, mid);
  AddAt(2 * node + 1, mid + 1, hi);
  max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + add_[node];
}

std::int64_t ExcessTree::LastPositive(std::uint32_t first, std::uint32_t last) const {
  if (size_ == 0 || first > last || first >= size_) return -1;
  query_first_ = first;
  query_last_ = std::min(last, size_ - 1);
  return FindAt(1, 0, size_ - 1, 0, true);
}

std::int64_t ExcessTree::FirstPositive(std::uint32_t first, std::uint32_t last) const {
  if (size_ == 0 || first > last || first >= size_) return -1;
  query_first_ = first;
  query_last_ = std::min(last, size_ - 1);
  return FindAt(1, 0, size_ - 1, 0, false);
}

// `above` is the sum of the pending adds of this node's ancestors.
std::int64_t ExcessTree::FindAt(std::size_t node, std::uint32_t lo, std::uint32_t hi,
                                std::int64_t above, bool last) const {
  if (hi < query_first_ || lo > query_last_ || max_[node] + above <= 0) return -1;
  if (lo == hi) return lo;
  const std::int64_t below = above + add_[node];
  const std::uint32_t mid = lo + (hi - lo) / 2;
  if (last) {
    const std::int64_t right = FindAt(2 * node + 1, mid + 1, hi, below, last);
    return right >= 0 ? right : FindAt(2 * node, lo, mid, below, last);
  }
  const std::int64_t left = FindAt(2 * node, lo, mid, below, last);
  return left >= 0 ? left : FindAt(2 * node + 1, mid + 1, hi, below, last);
}

}  // namespace chameleon::policy::detail
