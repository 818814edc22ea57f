#include "infeasibility.h"

#include <algorithm>

namespace chameleon::policy::detail {
namespace {

constexpr std::size_t kListed = 5;

std::vector<bool> OffDeviceAt(const Plan& plan, std::size_t tensors, std::uint32_t op) {
  std::vector<bool> off(tensors, false);
  for (const PlannedSwap& s : plan.swaps) {
    const std::size_t n = plan.memory_before.size();
    const bool first = s.free_from_op <= op && op < s.in_start_op;
    const bool next = s.free_from_op <= op + n && op + n < s.in_start_op;  // wrapped part
    if (first || next) off[s.tensor] = true;
  }
  return off;
}

bool LiveAt(const ProfileTensor& t, std::uint32_t op) {
  return t.alloc_op <= static_cast<std::int64_t>(op) &&
         (t.free_op < 0 || static_cast<std::int64_t>(op) <= t.free_op);
}

const char* Reason(const ProfileTensor& t, std::uint32_t op, const Plan& plan,
                   const GeneratorOptions& options) {
  // With short gaps any idle interval was a candidate: only the link can have stood in the way.
  const std::uint32_t min_layers = UsesShortGaps(options) ? 0 : 2;
  if (!t.swappable) return "marked unswappable";
  if (std::binary_search(t.uses.begin(), t.uses.end(), op)) return "used by this op";
  if (t.bytes < options.min_swap_bytes) return "smaller than min_swap_bytes";
  const auto next = std::upper_bound(t.uses.begin(), t.uses.end(), op);
  if (next == t.uses.begin() || next == t.uses.end()) {
    const bool across = options.cross_iteration && t.alloc_op < 0 && t.free_op < 0;
    if (!across || t.uses.empty()) return "not between two uses in the iteration";
    const std::uint32_t layers = static_cast<std::uint32_t>(plan.grid.layers.size()) +
                                 plan.grid.layer_of_op[t.uses.front()] -
                                 plan.grid.layer_of_op[t.uses.back()];
    return layers < min_layers ? "idle for less than two logical layers"
                               : "no link time left to move it around this op";
  }
  const std::uint32_t layers = plan.grid.layer_of_op[*next] - plan.grid.layer_of_op[*(next - 1)];
  if (layers < min_layers) return "idle for less than two logical layers";
  return "no link time left to move it around this op";
}

}  // namespace

Infeasibility ExplainInfeasibility(const Profile& profile, const Plan& plan,
                                   const GeneratorOptions& options) {
  Infeasibility info;
  const std::uint64_t limit = options.device_limit_bytes;
  for (std::size_t i = 0; i < plan.memory_after.size(); ++i) {
    const std::uint64_t m = plan.memory_after[i];
    if (m <= limit) continue;
    ++info.ops_over_limit;
    if (m - limit > info.bytes_missing) {
      info.bytes_missing = m - limit;
      info.at_op = static_cast<std::uint32_t>(i);
    }
  }
  const std::vector<bool> off = OffDeviceAt(plan, profile.tensors.size(), info.at_op);
  std::vector<UnswappableTensor> live;
  for (std::size_t t = 0; t < profile.tensors.size(); ++t) {
    const ProfileTensor& tensor = profile.tensors[t];
    const auto index = static_cast<std::uint32_t>(t);
    if (!LiveAt(tensor, info.at_op) || off[t]) continue;
    live.push_back(
        {index, tensor.external_id, tensor.bytes, Reason(tensor, info.at_op, plan, options)});
  }
  const std::size_t keep = std::min(live.size(), kListed);
  std::partial_sort(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(keep), live.end(),
                    [](const UnswappableTensor& a, const UnswappableTensor& b) {
                      return a.bytes != b.bytes ? a.bytes > b.bytes : a.tensor < b.tensor;
                    });
  live.resize(keep);
  info.largest_unswappable = std::move(live);
  return info;
}

std::string InfeasibilityMessage(const Profile& profile, const Infeasibility& info) {
  const ProfileOp& op = profile.ops[info.at_op];
  std::string message = std::to_string(info.bytes_missing) + " bytes still over the limit at op " +
                        std::to_string(info.at_op) + " (token " + std::to_string(op.token);
  if (!op.name.empty()) message += " '" + op.name + "'";
  message += "), " + std::to_string(info.ops_over_limit) + " ops over the limit";
  if (!info.largest_unswappable.empty()) message += "; largest unswappable tensors:";
  for (const UnswappableTensor& t : info.largest_unswappable) {
    message += " tensor " + std::to_string(t.tensor) + " (id " + std::to_string(t.external_id) +
               ", " + std::to_string(t.bytes) + " bytes: " + t.reason + ")";
  }
  return message;
}

}  // namespace chameleon::policy::detail
