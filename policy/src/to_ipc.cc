#include <algorithm>

#include "chameleon/policy/anchors.h"
#include "chameleon/policy/generator.h"
#include "chameleon/policy/matcher.h"
#include "swap_in_order.h"

namespace chameleon::policy {

ipc::Policy ToIpcPolicy(const Plan& plan, const Profile& profile) {
  ipc::Policy policy;
  policy.summary.stage = static_cast<std::uint32_t>(ipc::Stage::kGenPolicy);
  policy.summary.device_limit_bytes = plan.device_limit_bytes;
  policy.summary.predicted_peak_bytes = plan.predicted_peak_bytes;
  policy.summary.predicted_iteration_s = plan.predicted_iteration_s;
  policy.summary.predicted_stall_s = plan.predicted_stall_s;
  policy.summary.predicted_in_wait_s = plan.predicted_in_wait_s;
  policy.summary.iteration_ops = profile.ops.size();
  if (plan.swaps.empty()) return policy;
  const std::vector<OpAnchor> anchors = AnchorOps(profile);
  const std::vector<TensorFeatures> features = ComputeFeatures(profile);
  std::vector<PlannedSwap> swaps = plan.swaps;
  const std::size_t n = profile.ops.size();
  // Entries in the order of their uses (folded onto one iteration): where several swap-ins
  // share one trigger the shim issues them in entry order on its one in-stream, so the first
  // use's bytes travel first (docs/policy.md "Swap-in order"). Ties: swap-out op, tensor.
  std::sort(swaps.begin(), swaps.end(), [n](const PlannedSwap& a, const PlannedSwap& b) {
    const std::uint32_t ua = detail::FoldedUse(a, n), ub = detail::FoldedUse(b, n);
    if (ua != ub) return ua < ub;
    return a.out_after_op != b.out_after_op ? a.out_after_op < b.out_after_op : a.tensor < b.tensor;
  });
  policy.entries.reserve(swaps.size());
  // Ops >= n are the next iteration's: the anchor is the same (token, occurrence).
  const auto anchor = [&](std::uint32_t op) { return anchors[op % n]; };
  // The tensor's index among its out-anchor op's tensors, in the order the shim lists them: a
  // profile op's reads then writes (the daemon's ProfileBuilder keeps a launch's ids in record
  // order, a copy's source in reads and destination in writes, a memset's destination in writes).
  const auto arg_of = [&](std::uint32_t op, std::uint32_t tensor) -> std::uint16_t {
    const ProfileOp& o = profile.ops[op % n];
    std::size_t i = 0;
    for (const auto* list : {&o.reads, &o.writes}) {
      for (std::uint32_t t : *list) {
        if (t == tensor)
          return i < ipc::kOutArgUnknown ? static_cast<std::uint16_t>(i) : ipc::kOutArgUnknown;
        ++i;
      }
    }
    return ipc::kOutArgUnknown;
  };
  for (const PlannedSwap& s : swaps) {
    const TensorFeatures& f = features[s.tensor];
    ipc::SwapEntry e{};
    e.match_key = f.match_key;
    e.bytes = s.bytes;
    e.use_count = f.use_count;
    e.token_tag = f.token_tag;
    e.out_token = anchor(s.out_after_op).token;
    e.out_occurrence = anchor(s.out_after_op).occurrence;
    e.in_token = anchor(s.in_start_op).token;
    e.in_occurrence = anchor(s.in_start_op).occurrence;
    e.use_token = anchor(s.use_op).token;
    e.use_occurrence = anchor(s.use_op).occurrence;
    e.tier = static_cast<std::uint16_t>(s.tier);
    e.helper = s.helper;
    e.out_arg = arg_of(s.out_after_op, s.tensor);
    // Either trigger past the iteration's end makes the binding outlive the boundary.
    if (s.in_start_op >= n || s.use_op >= n) e.entry_flags |= ipc::kEntryWraps;
    policy.entries.push_back(e);
  }
  return policy;
}

}  // namespace chameleon::policy
