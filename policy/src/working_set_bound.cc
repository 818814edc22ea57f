#include "chameleon/policy/working_set_bound.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "chameleon/policy/op_seconds.h"

namespace chameleon::policy {
namespace {

/// Enumerating subsets stays cheap up to this many candidates (2^16 sums); beyond it the
/// fractional E_i is used, which is still a lower bound.
constexpr std::size_t kExactCandidates = 16;

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

/// The tensors an op needs resident: the ones it reads or writes and the ones allocated just
/// before it. `stamp` marks them with `mark` (no duplicates in the result).
std::vector<std::uint32_t> Needed(const ProfileOp& op, const std::vector<std::uint32_t>& allocated,
                                  std::uint32_t mark, std::vector<std::uint32_t>* stamp) {
  std::vector<std::uint32_t> out;
  auto add = [&](std::uint32_t t) {
    if (t < stamp->size() && (*stamp)[t] != mark) {
      (*stamp)[t] = mark;
      out.push_back(t);
    }
  };
  for (const std::uint32_t t : op.reads) add(t);
  for (const std::uint32_t t : op.writes) add(t);
  for (const std::uint32_t t : allocated) add(t);
  return out;
}

}  // namespace

WorkingSetBound ComputeWorkingSetBound(const Profile& profile, std::uint64_t limit_bytes,
                                       double out_bytes_per_s) {
  WorkingSetBound b;
  for (const double s : OpSeconds(profile)) b.compute_s += s;
  const std::size_t ops = profile.ops.size();
  std::vector<std::vector<std::uint32_t>> allocated(ops), freed(ops);
  for (std::uint32_t t = 0; t < profile.tensors.size(); ++t) {
    const ProfileTensor& tensor = profile.tensors[t];
    if (tensor.alloc_op >= 0 && static_cast<std::size_t>(tensor.alloc_op) < ops) {
      allocated[static_cast<std::size_t>(tensor.alloc_op)].push_back(t);
    }
    if (tensor.free_op >= 0 && static_cast<std::size_t>(tensor.free_op) < ops) {
      freed[static_cast<std::size_t>(tensor.free_op)].push_back(t);
    }
  }
  // stamp[t] == 2k + 1: t is needed by op k; 2k + 2: t is freed right after op k.
  std::vector<std::uint32_t> stamp(profile.tensors.size(), 0);
  auto bytes_of = [&](const std::vector<std::uint32_t>& ts) {
    std::uint64_t sum = 0;
    for (const std::uint32_t t : ts) sum += profile.tensors[t].bytes;
    return sum;
  };
  std::vector<std::uint32_t> current;  // R(i)
  for (std::size_t i = 0; i < ops; ++i) {
    const auto mark_needed = static_cast<std::uint32_t>(2 * i + 1);
    std::vector<std::uint32_t> next = Needed(profile.ops[i], allocated[i], mark_needed, &stamp);
    const std::uint64_t next_bytes = bytes_of(next);
    if (next_bytes > limit_bytes) {
      b.feasible = false;
      b.worst_op = static_cast<std::int64_t>(i);
      b.worst_bytes = next_bytes - limit_bytes;
      break;
    }
    if (i > 0) {
      // K: op i - 1's tensors that op i does not need and that are not freed in between.
      for (const std::uint32_t t : freed[i - 1]) {
        if (stamp[t] != mark_needed) stamp[t] = mark_needed + 1;
      }
      std::vector<std::uint64_t> stay;
      std::uint64_t stay_bytes = 0;
      for (const std::uint32_t t : current) {
        if (stamp[t] == mark_needed || stamp[t] == mark_needed + 1) continue;
        if (profile.tensors[t].bytes == 0) continue;  // moving it makes no room: not a candidate
        stay.push_back(profile.tensors[t].bytes);
        stay_bytes += profile.tensors[t].bytes;
      }
      if (next_bytes + stay_bytes > limit_bytes) {
        const std::uint64_t need = next_bytes + stay_bytes - limit_bytes;
        const std::uint64_t moved = LeastSumReaching(stay, need);
        b.out_bytes += moved;
        ++b.boundaries;
        if (moved > b.worst_bytes) {
          b.worst_bytes = moved;
          b.worst_op = static_cast<std::int64_t>(i - 1);
        }
      }
    }
    current = std::move(next);
  }
  b.stall_s = out_bytes_per_s > 0 ? static_cast<double>(b.out_bytes) / out_bytes_per_s : 0;
  b.bound_s = b.compute_s + b.stall_s;
  return b;
}

}  // namespace chameleon::policy
