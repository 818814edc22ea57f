#include "figures.h"

#include <algorithm>
#include <cmath>

namespace chameleon::probe {

Spread SpreadOf(std::vector<double> s) {
  if (s.empty()) return {};
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  const double median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(n)));
  return {median, s[std::max<std::size_t>(rank, 1) - 1]};
}

}  // namespace chameleon::probe
