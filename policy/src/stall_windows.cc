#include "stall_windows.h"

#include <algorithm>

namespace chameleon::policy::detail {

double LeastWindowStall(const std::vector<double>& op_seconds,
                        const std::vector<CopyWindow>& windows, double out_bytes_per_s,
                        double in_bytes_per_s) {
  const std::size_t gaps = op_seconds.size() + 1;
  std::vector<double> compute_before(gaps, 0.0);  // compute of ops [0, g)
  for (std::size_t k = 0; k < op_seconds.size(); ++k) {
    compute_before[k + 1] = compute_before[k] + op_seconds[k];
  }
  std::vector<std::vector<const CopyWindow*>> ending(gaps);
  for (const CopyWindow& w : windows) {
    if (w.bytes > 0 && w.end_gap < gaps && w.begin_gap <= w.end_gap)
      ending[w.end_gap].push_back(&w);
  }
  // Bytes of the windows seen so far (end <= the current e) by begin gap; `begins` lists the
  // gaps that have some, ascending. For a fixed set of contained windows an interval's stall only
  // shrinks as it starts earlier (more compute, same bytes) and best[] never grows that way
  // either, so an optimal interval starts at some window's begin gap.
  std::vector<double> out_at(gaps, 0.0), in_at(gaps, 0.0);
  std::vector<std::uint32_t> begins;
  std::vector<double> best(gaps + 1, 0.0);  // best[g]: least stall of intervals ending before g
  for (std::size_t e = 0; e < gaps; ++e) {
    for (const CopyWindow* w : ending[e]) {
      if (out_at[w->begin_gap] == 0 && in_at[w->begin_gap] == 0) {
        begins.insert(std::upper_bound(begins.begin(), begins.end(), w->begin_gap), w->begin_gap);
      }
      (w->outward ? out_at : in_at)[w->begin_gap] += static_cast<double>(w->bytes);
    }
    double value = best[e];
    double out_bytes = 0, in_bytes = 0;
    for (auto it = begins.rbegin(); it != begins.rend(); ++it) {
      const std::uint32_t s = *it;
      out_bytes += out_at[s];
      in_bytes += in_at[s];
      const double link_s = std::max(out_bytes / out_bytes_per_s, in_bytes / in_bytes_per_s);
      const double stall = link_s - (compute_before[e] - compute_before[s]);
      if (stall > 0) value = std::max(value, best[s] + stall);
    }
    best[e + 1] = value;
  }
  return best[gaps];
}

}  // namespace chameleon::policy::detail
