// Internal: the least stall that a set of copy windows forces on a serial op stream.
//
// A window is a copy of `bytes` in one direction that cannot start before a gap between two ops
// and must end by a later gap (gap g lies just before op g; gap = ops is the iteration's end).
// An interval of gaps [s, e] lasts at least as long as each direction's copies whose windows lie
// inside it take on their link, while its ops compute only for their own time; the rest is stall.
// Disjoint intervals stall at different moments, so their stalls add up: the least stall is the
// best sum over disjoint intervals (weighted interval scheduling, a dynamic programme).
#pragma once

#include <cstdint>
#include <vector>

namespace chameleon::policy::detail {

struct CopyWindow {
  std::uint32_t begin_gap = 0;  ///< the copy starts at or after this gap
  std::uint32_t end_gap = 0;    ///< and has ended by this one (>= begin_gap)
  std::uint64_t bytes = 0;
  bool outward = true;  ///< device -> elsewhere (else into the device)
};

/// `op_seconds[k]`: op k's compute time (never less in any run); windows with end_gap beyond
/// op_seconds.size() are ignored. Bandwidths > 0. O(gaps x distinct begin gaps + windows).
double LeastWindowStall(const std::vector<double>& op_seconds,
                        const std::vector<CopyWindow>& windows, double out_bytes_per_s,
                        double in_bytes_per_s);

}  // namespace chameleon::policy::detail
