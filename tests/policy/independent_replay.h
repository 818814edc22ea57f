// Test support: an independent judge of plans. Written apart from the generator (no policy
// internals): recomputes memory from the raw profile and the plan's off-device intervals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/policy/generator.h"
#include "chameleon/policy/profile.h"

namespace chameleon::policy::testing {

/// Whether the swap keeps its tensor off the device at op i. Swap op numbers >= n are the next
/// iteration's (a swap across the boundary); in steady state both parts apply to every iteration.
inline bool OffAt(const PlannedSwap& s, std::size_t i, std::size_t n) {
  return (s.free_from_op <= i && i < s.in_start_op) ||
         (s.free_from_op <= i + n && i + n < s.in_start_op);
}

/// Device bytes during each op: tensors with alloc_op <= i <= free_op, plus untracked bytes
/// (bytes_live_after above what the same tensors explain: it counts a tensor up to and including
/// its free op, docs/profile-format.md), minus bytes off the device per the plan's swaps
/// ([free_from_op, in_start_op)).
inline std::vector<std::int64_t> ReplayWithPlan(const Profile& p,
                                                const std::vector<PlannedSwap>& swaps) {
  const std::size_t n = p.ops.size();
  std::vector<std::int64_t> mem(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t during = 0;
    for (const ProfileTensor& t : p.tensors) {
      const bool started = t.alloc_op <= static_cast<std::int64_t>(i);
      if (started && (t.free_op < 0 || static_cast<std::int64_t>(i) <= t.free_op)) {
        during += static_cast<std::int64_t>(t.bytes);
      }
    }
    const auto seen = static_cast<std::int64_t>(p.ops[i].bytes_live_after);
    mem[i] = during + (seen > during ? seen - during : 0);
    for (const PlannedSwap& s : swaps) {
      if (OffAt(s, i, n)) mem[i] -= static_cast<std::int64_t>(s.bytes);
    }
  }
  return mem;
}

/// Empty when `swaps` is a valid plan under `limit`; otherwise the first violation.
inline std::string JudgePlan(const Profile& p, const std::vector<PlannedSwap>& swaps,
                             std::uint64_t limit) {
  for (std::size_t k = 0; k < swaps.size(); ++k) {
    const PlannedSwap& s = swaps[k];
    const std::string name = "swap " + std::to_string(k) + ": ";
    if (s.tensor >= p.tensors.size()) return name + "bad tensor";
    const ProfileTensor& t = p.tensors[s.tensor];
    if (!t.swappable) return name + "unswappable tensor swapped";
    if (s.bytes != t.bytes) return name + "bytes differ from the tensor";
    if (!(s.out_after_op < s.free_from_op && s.free_from_op < s.in_start_op &&
          s.in_start_op <= s.use_op)) {
      return name + "trigger order out_after < free_from < in_start <= use violated";
    }
    const std::size_t n = p.ops.size();
    if (s.out_after_op >= n || s.use_op >= 2 * n || s.use_op - s.out_after_op > n) {
      return name + "gap longer than one iteration";
    }
    if (s.use_op >= n && (t.alloc_op >= 0 || t.free_op >= 0)) {
      return name + "crosses the iteration boundary but does not live across it";
    }
    bool out_is_use = false, use_is_use = false;
    for (std::uint32_t u : t.uses) {
      out_is_use |= u == s.out_after_op;
      use_is_use |= u == s.use_op % n;
      for (std::size_t v : {std::size_t{u}, u + n}) {  // this iteration and the next
        if (v > s.out_after_op && v < s.use_op) return name + "tensor used inside its gap";
      }
      // Resident at each of its uses: no use while off the device.
      if (OffAt(s, u, n)) return name + "used while off the device";
    }
    if (!out_is_use || !use_is_use) return name + "triggers are not uses of the tensor";
    for (std::size_t j = 0; j < k; ++j) {
      const PlannedSwap& o = swaps[j];
      if (o.tensor != s.tensor) continue;
      for (std::size_t i = 0; i < n; ++i) {
        if (OffAt(o, i, n) && OffAt(s, i, n)) return name + "overlaps another swap of its tensor";
      }
    }
  }
  const std::vector<std::int64_t> mem = ReplayWithPlan(p, swaps);
  for (std::size_t i = 0; i < mem.size(); ++i) {
    if (mem[i] > static_cast<std::int64_t>(limit)) {
      return "op " + std::to_string(i) + " uses " + std::to_string(mem[i]) + " > limit " +
             std::to_string(limit);
    }
  }
  return {};
}

}  // namespace chameleon::policy::testing
