// Internal: order-preserving alignment of two sequences (Needleman-Wunsch without gap cost,
// banded). Used by the matcher: ops inserted in an iteration keep the original tensors in order,
// so the best matching is the alignment with the highest total similarity. A tensor with no
// counterpart (created by an inserted op) stays unmatched instead of pushing every later match
// off by one, which a greedy walk cannot avoid.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace chameleon::policy::detail {

/// For each row i < rows, the column it is aligned with, or -1. `score(i, j)` is the reward for
/// aligning i with j; pairs below `threshold` are never aligned. Only columns within `band` of
/// the diagonal i·cols/rows are considered: O(rows · band) time and memory.
template <typename Score>
std::vector<std::int32_t> AlignOrdered(std::size_t rows, std::size_t cols, std::size_t band,
                                       Score score, double threshold) {
  std::vector<std::int32_t> result(rows, -1);
  if (rows == 0 || cols == 0) return result;
  // Wide enough that consecutive rows' bands overlap whatever the aspect ratio.
  const std::size_t half = band + cols / rows + 1;
  const std::size_t width = 2 * half + 1;
  const auto low = [&](std::size_t i) {
    const std::size_t center = i * cols / rows;
    return center > half ? center - half : 0;
  };
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  // value(i, j) for j in [low(i), low(i) + width); choice: 0 skip row, 1 skip column, 2 align.
  std::vector<double> previous(width, kNone), row(width, kNone);
  std::vector<std::uint8_t> choice((rows + 1) * width, 0);
  const auto at = [&](const std::vector<double>& v, std::size_t i, std::size_t j) {
    const std::size_t lo = low(i);
    return j < lo || j >= lo + width || j > cols ? kNone : v[j - lo];
  };
  for (std::size_t j = 0; j < width && j <= cols; ++j) previous[j] = 0;  // row 0: nothing aligned
  for (std::size_t i = 1; i <= rows; ++i) {
    const std::size_t lo = low(i);
    std::fill(row.begin(), row.end(), kNone);
    for (std::size_t j = lo; j < lo + width && j <= cols; ++j) {
      double best = at(previous, i - 1, j);
      std::uint8_t pick = 0;
      if (j > lo && row[j - 1 - lo] > best) best = row[j - 1 - lo], pick = 1;
      if (j > 0) {
        const double up_left = at(previous, i - 1, j - 1);
        const double s = up_left == kNone ? kNone : score(i - 1, j - 1);
        if (s >= threshold && up_left + s > best) best = up_left + s, pick = 2;
      }
      row[j - lo] = best;
      choice[i * width + (j - lo)] = pick;
    }
    std::swap(previous, row);
  }
  // Trace back from the best cell of the last row.
  std::size_t i = rows, j = low(rows);
  for (std::size_t k = low(rows); k < low(rows) + width && k <= cols; ++k) {
    if (at(previous, rows, k) > at(previous, rows, j)) j = k;
  }
  while (i > 0) {
    const std::uint8_t pick = choice[i * width + (j - low(i))];
    if (pick == 2) result[i - 1] = static_cast<std::int32_t>(j - 1);
    if (pick == 1) {
      --j;
    } else {
      j -= pick == 2 ? 1 : 0;
      --i;
    }
  }
  return result;
}

}  // namespace chameleon::policy::detail
