#include "chameleon/policy/working_set_bound.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "chameleon/policy/op_seconds.h"
#include "excess_tree.h"
#include "stall_windows.h"

namespace chameleon::policy {
namespace {

/// Enumerating subsets stays cheap up to this many candidates (2^16 sums); beyond it the
/// fractional E_i is used, which is still a lower bound.
constexpr std::size_t kExactCandidates = 16;
/// The windows' dynamic programme costs ops x distinct begin gaps; beyond this many tensor
/// windows it is skipped and the pairs' stalls alone are the bound (still a bound).
constexpr std::size_t kMaxTensorWindows = 100'000;

/// The least sum of a subset of `sizes` that reaches `need` (need <= the sum of all).
std::uint64_t LeastSumReaching(const std::vector<std::uint64_t>& sizes, std::uint64_t need) {
  if (sizes.size() > kExactCandidates) return need;
  std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
  const std::uint32_t subsets = 1u << sizes.size();
  for (std::uint32_t mask = 1; mask < subsets; ++mask) {
    std::uint64_t sum = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      if (mask & (1u << k)) sum += sizes[k];
    }
    if (sum >= need) best = std::min(best, sum);
  }
  return best;
}

/// One op's access to a tensor.
struct Use {
  std::uint32_t op = 0;
  bool reads = false;
};

/// What the bound needs to know of a profile, by op and by tensor.
struct OpSets {
  std::vector<std::vector<std::uint32_t>> needed;  ///< R(k): read, written or allocated for op k
  std::vector<std::uint64_t> needed_bytes;         ///< |R(k)|
  std::vector<std::vector<std::uint32_t>> freed;   ///< freed right after op k
  std::vector<std::vector<Use>> uses;              ///< per tensor, by op (reads and writes only)
};

OpSets Collect(const Profile& profile) {
  const std::size_t ops = profile.ops.size(), tensors = profile.tensors.size();
  OpSets s;
  s.needed.resize(ops);
  s.needed_bytes.assign(ops, 0);
  s.freed.resize(ops);
  s.uses.resize(tensors);
  std::vector<std::vector<std::uint32_t>> allocated(ops);
  for (std::uint32_t t = 0; t < tensors; ++t) {
    const ProfileTensor& tensor = profile.tensors[t];
    if (tensor.alloc_op >= 0 && static_cast<std::size_t>(tensor.alloc_op) < ops) {
      allocated[static_cast<std::size_t>(tensor.alloc_op)].push_back(t);
    }
    if (tensor.free_op >= 0 && static_cast<std::size_t>(tensor.free_op) < ops) {
      s.freed[static_cast<std::size_t>(tensor.free_op)].push_back(t);
    }
  }
  std::vector<std::uint32_t> stamp(tensors, 0);  // op + 1 once t is in R(op)
  for (std::uint32_t k = 0; k < ops; ++k) {
    const ProfileOp& op = profile.ops[k];
    auto add = [&](std::uint32_t t, bool use, bool reads) {
      if (t >= tensors) return;
      if (stamp[t] != k + 1) {
        stamp[t] = k + 1;
        s.needed[k].push_back(t);
        s.needed_bytes[k] += profile.tensors[t].bytes;
      }
      if (!use) return;
      std::vector<Use>& u = s.uses[t];
      if (u.empty() || u.back().op != k) u.push_back({k, false});
      u.back().reads = u.back().reads || reads;
    };
    for (const std::uint32_t t : op.reads) add(t, true, true);
    for (const std::uint32_t t : op.writes) add(t, true, false);
    for (const std::uint32_t t : allocated[k]) add(t, false, false);
  }
  return s;
}

/// Whether tensor t's content after op `op` is read again: by its next use in the iteration, or
/// for a tensor that exists before the iteration starts, by its first use in the next one. A
/// tensor whose next use only writes it (or that is freed unread) may be dropped without a copy.
bool LiveAfter(const OpSets& s, const Profile& profile, std::uint32_t t, std::uint32_t op) {
  const std::vector<Use>& u = s.uses[t];
  const auto next = std::upper_bound(u.begin(), u.end(), op,
                                     [](std::uint32_t o, const Use& x) { return o < x.op; });
  if (next != u.end()) return next->reads;
  return profile.tensors[t].alloc_op < 0 && !u.empty() && u.front().reads;
}

/// The pairs of consecutive ops (section "E_i" of the header). Fills `b`'s pair fields and
/// returns M_i by the gap it falls in (gap i + 1: after op i).
std::vector<std::uint64_t> PairStalls(const Profile& profile, const OpSets& s,
                                      std::uint64_t limit_bytes, WorkingSetBound* b) {
  const std::size_t ops = profile.ops.size();
  std::vector<std::uint64_t> forced(ops + 1, 0);
  std::vector<std::uint32_t> mark(profile.tensors.size(), 0);  // i + 1: in R(i + 1) or freed
  for (std::uint32_t i = 0; i + 1 < ops; ++i) {
    for (const std::uint32_t t : s.needed[i + 1]) mark[t] = i + 1;
    for (const std::uint32_t t : s.freed[i]) mark[t] = i + 1;
    // K: op i's tensors that op i + 1 does not need and that are not freed in between. A dead
    // one (its content never read again) leaves without a copy: it makes room for free.
    std::vector<std::uint64_t> live;
    std::uint64_t live_bytes = 0;
    for (const std::uint32_t t : s.needed[i]) {
      const std::uint64_t bytes = profile.tensors[t].bytes;
      if (mark[t] == i + 1 || bytes == 0) continue;  // a zero-byte one makes no room
      if (!LiveAfter(s, profile, t, i)) continue;
      live.push_back(bytes);
      live_bytes += bytes;
    }
    const std::uint64_t together = s.needed_bytes[i + 1] + live_bytes;
    if (together <= limit_bytes) continue;
    const std::uint64_t need = together - limit_bytes;
    const std::uint64_t moved = LeastSumReaching(live, need);
    forced[i + 1] = moved;
    b->out_bytes += moved;
    ++b->boundaries;
    if (moved > b->worst_bytes) {
      b->worst_bytes = moved;
      b->worst_op = i;
    }
  }
  return forced;
}

/// The tensor windows: between two uses of t where the second reads it, any op whose own
/// tensors leave no room for t forces t out after the first use and before that op, and back
/// after the last such op and before the second use.
std::vector<detail::CopyWindow> TensorWindows(const Profile& profile, const OpSets& s,
                                              std::uint64_t limit_bytes) {
  std::vector<std::int64_t> excess(profile.ops.size());  // |R(k)| - limit
  for (std::size_t k = 0; k < excess.size(); ++k) {
    excess[k] =
        static_cast<std::int64_t>(s.needed_bytes[k]) - static_cast<std::int64_t>(limit_bytes);
  }
  detail::ExcessTree tree(excess);
  std::vector<detail::CopyWindow> windows;
  for (std::uint32_t t = 0; t < profile.tensors.size(); ++t) {
    const auto bytes = static_cast<std::int64_t>(profile.tensors[t].bytes);
    if (bytes == 0) continue;
    const std::vector<Use>& u = s.uses[t];
    for (std::size_t k = 1; k < u.size(); ++k) {
      const std::uint32_t first = u[k - 1].op, second = u[k].op;
      if (!u[k].reads || second - first < 2) continue;
      // Ops strictly between the two uses where |R(op)| + |t| > limit.
      tree.Add(first + 1, second - 1, bytes);
      const std::int64_t blocked_first = tree.FirstPositive(first + 1, second - 1);
      const std::int64_t blocked_last = tree.LastPositive(first + 1, second - 1);
      tree.Add(first + 1, second - 1, -bytes);
      if (blocked_first < 0) continue;
      const auto out_end = static_cast<std::uint32_t>(blocked_first);
      const auto in_begin = static_cast<std::uint32_t>(blocked_last + 1);
      windows.push_back({first + 1, out_end, static_cast<std::uint64_t>(bytes), true});
      windows.push_back({in_begin, second, static_cast<std::uint64_t>(bytes), false});
    }
  }
  return windows;
}

}  // namespace

WorkingSetBound ComputeWorkingSetBound(const Profile& profile, std::uint64_t limit_bytes,
                                       double out_bytes_per_s, double in_bytes_per_s) {
  WorkingSetBound b;
  const std::vector<double> op_seconds = OpSeconds(profile);
  for (const double sec : op_seconds) b.compute_s += sec;
  const std::size_t ops = profile.ops.size();
  const OpSets s = Collect(profile);
  for (std::size_t i = 0; i < ops; ++i) {
    if (s.needed_bytes[i] > limit_bytes) {
      b.feasible = false;
      b.worst_op = static_cast<std::int64_t>(i);
      b.worst_bytes = s.needed_bytes[i] - limit_bytes;
      b.bound_s = b.compute_s;
      return b;
    }
  }
  const std::vector<std::uint64_t> forced = PairStalls(profile, s, limit_bytes, &b);
  b.pair_stall_s = out_bytes_per_s > 0 ? static_cast<double>(b.out_bytes) / out_bytes_per_s : 0;
  b.stall_s = b.pair_stall_s;
  if (HasOpTimes(profile) && out_bytes_per_s > 0 && in_bytes_per_s > 0) {
    std::vector<detail::CopyWindow> windows = TensorWindows(profile, s, limit_bytes);
    if (windows.size() / 2 <= kMaxTensorWindows) {  // an out and an in copy each
      b.tensor_windows = static_cast<std::uint32_t>(windows.size() / 2);
      // A pair's M_i and the tensors forced out at the same gap are the same copies: the gap
      // carries the larger of the two, not their sum.
      std::vector<std::uint64_t> at_gap(ops + 1, 0);
      for (const detail::CopyWindow& w : windows) {
        if (w.outward && w.begin_gap == w.end_gap) at_gap[w.begin_gap] += w.bytes;
      }
      for (std::uint32_t g = 0; g <= ops; ++g) {
        if (forced[g] > at_gap[g]) windows.push_back({g, g, forced[g] - at_gap[g], true});
      }
      b.windowed = true;
      b.stall_s =
          std::max(b.pair_stall_s,
                   detail::LeastWindowStall(op_seconds, windows, out_bytes_per_s, in_bytes_per_s));
    }
  }
  b.bound_s = b.compute_s + b.stall_s;
  return b;
}

}  // namespace chameleon::policy
