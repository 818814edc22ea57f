#include "chameleon/policy/generator.h"

#include <algorithm>
#include <cmath>

#include "chameleon/policy/candidates.h"
#include "chameleon/policy/memory.h"
#include "chameleon/policy/op_seconds.h"
#include "chameleon/policy/phases.h"
#include "executor_replay.h"
#include "infeasibility.h"
#include "search.h"
#include "swap_in_order.h"

namespace chameleon::policy {
namespace {

std::string CheckOptions(const GeneratorOptions& o) {
  if (o.device_limit_bytes == 0) return "device_limit_bytes must be set";
  if (o.device_limit_bytes > (1ull << 62)) return "device_limit_bytes beyond 2^62";
  if (!(o.host_bandwidth_bytes_per_s > 0) || !std::isfinite(o.host_bandwidth_bytes_per_s)) {
    return "host_bandwidth_bytes_per_s must be positive";
  }
  for (const double b : {o.device_to_host_bytes_per_s, o.host_to_device_bytes_per_s}) {
    if (!(b >= 0) || !std::isfinite(b)) return "a per-direction bandwidth must be >= 0 (0: unset)";
  }
  if (!(o.link_efficiency > 0 && o.link_efficiency <= 1)) return "link_efficiency not in (0, 1]";
  if (!(o.size_weight >= 0) || !std::isfinite(o.size_weight)) return "size_weight must be >= 0";
  if (!(o.prefetch_margin >= 0) || !std::isfinite(o.prefetch_margin)) {
    return "prefetch_margin must be >= 0";
  }
  // Rounding adds at most chunk_bytes per tensor: with <= 2^31 tensors and sizes <= 2^62 the
  // memory arithmetic stays inside signed 64 bits.
  if (o.chunk_bytes > (1ull << 30)) return "chunk_bytes beyond 1 GiB";
  if (o.reserve_bytes >= o.device_limit_bytes) return "reserve_bytes must be below the limit";
  return {};
}

std::uint32_t LayersPerPhase(const Profile& profile, const GeneratorOptions& options) {
  if (options.layers_per_phase > 0) return options.layers_per_phase;
  if (profile.layers_hint > 0) return profile.layers_hint;
  return kDefaultLayersPerPhase;
}

void Summarise(const Profile& profile, const GeneratorOptions& options, Plan* plan) {
  plan->memory_after = detail::MemoryAfter(plan->memory_before, plan->swaps);
  plan->predicted_peak_bytes =
      *std::max_element(plan->memory_after.begin(), plan->memory_after.end());
  const detail::ReplayedIteration replayed =
      detail::ReplayOnExecutor(profile, plan->swaps, options, OpSeconds(profile));
  plan->predicted_in_wait_s = replayed.in_wait_s;
  plan->predicted_out_wait_s = replayed.out_wait_s;
  plan->predicted_stall_s = replayed.in_wait_s + replayed.out_wait_s;
  plan->predicted_iteration_s = plan->iteration_s + plan->predicted_stall_s;
  plan->simulated_stall_s = 0;
  for (const PlannedSwap& s : plan->swaps) plan->simulated_stall_s += s.stall_s;
}

GenerateResult Fail(GenerateStatus status, std::string message) {
  GenerateResult result;
  result.status = status;
  result.message = std::move(message);
  return result;
}

}  // namespace

const char* ToString(GenerateStatus status) {
  switch (status) {
    case GenerateStatus::kOk:
      return "ok";
    case GenerateStatus::kInvalidProfile:
      return "invalid profile";
    case GenerateStatus::kInvalidOptions:
      return "invalid options";
    case GenerateStatus::kInfeasible:
      return "infeasible";
  }
  return "unknown";
}

GenerateResult GeneratePlan(const Profile& profile, const GeneratorOptions& options) {
  if (std::string problem = ValidateProfile(profile); !problem.empty()) {
    return Fail(GenerateStatus::kInvalidProfile, std::move(problem));
  }
  if (std::string problem = CheckOptions(options); !problem.empty()) {
    return Fail(GenerateStatus::kInvalidOptions, std::move(problem));
  }
  GenerateResult result;
  Plan& plan = result.plan;
  plan.device_limit_bytes = options.device_limit_bytes;
  // Everything below plans against the limit minus the reserve.
  GeneratorOptions planning = options;
  planning.device_limit_bytes = options.device_limit_bytes - options.reserve_bytes;
  plan.planning_limit_bytes = planning.device_limit_bytes;
  const std::vector<double> op_s = OpSeconds(profile);
  plan.iteration_s = profile.iteration_s;  // exactly, where every op has the uniform share
  if (HasOpTimes(profile)) {
    plan.iteration_s = 0;
    for (const double s : op_s) plan.iteration_s += s;
  }
  plan.phases = DetectPhases(profile);
  plan.grid = BuildLayers(plan.phases, op_s, LayersPerPhase(profile, options));
  plan.memory_before = ReplayMemory(profile, options.chunk_bytes, options.min_swap_bytes);
  plan.peak_before_bytes = *std::max_element(plan.memory_before.begin(), plan.memory_before.end());

  const std::size_t n = profile.ops.size();
  std::vector<std::int64_t> excess(n);
  std::vector<std::uint32_t> mre_prefix(n + 1, 0);
  const auto limit = static_cast<std::int64_t>(planning.device_limit_bytes);
  for (std::size_t i = 0; i < n; ++i) {
    excess[i] = static_cast<std::int64_t>(plan.memory_before[i]) - limit;
    mre_prefix[i + 1] = mre_prefix[i] + (excess[i] > 0 ? 1 : 0);
  }
  detail::SearchOutcome best;
  best.max_excess = static_cast<std::int64_t>(plan.peak_before_bytes) - limit;
  if (best.max_excess > 0) {
    best = detail::SearchSwaps(FindCandidates(profile, plan.grid, mre_prefix, planning), plan.grid,
                               excess, planning);
  }
  if (best.max_excess > 0 && UsesShortGaps(planning)) {
    // The paper's gaps leave some op over the limit: its working set needs a tensor off for a
    // few ops only. Plans that fit without short gaps never see them (their stalls are certain).
    detail::SearchOutcome shorter = detail::SearchSwaps(
        FindCandidates(profile, plan.grid, mre_prefix, planning, GapRule::kAnyLength), plan.grid,
        excess, planning);
    if (shorter.max_excess < best.max_excess) best = std::move(shorter);
  }
  plan.swaps = std::move(best.swaps);
  // Only the executor's accounting issues swap-ins as early as memory allows, which is where
  // their order on the shim's one in-stream decides when the first use can run; the paper's
  // model places each swap-in just in time on its own.
  if (best.max_excess <= 0 && options.release_at_issue) {
    detail::DropSwapsRedundantUntilUse(plan.memory_before, limit, &plan.swaps);
    detail::OrderSwapInsByUse(plan.memory_before, limit, &plan.swaps);
  }
  Summarise(profile, options, &plan);
  if (best.max_excess > 0) {
    result.status = GenerateStatus::kInfeasible;
    result.infeasibility = detail::ExplainInfeasibility(profile, plan, planning);
    result.message = detail::InfeasibilityMessage(profile, result.infeasibility);
    plan.swaps.clear();  // never hand out a plan that does not fit
    Summarise(profile, options, &plan);
  }
  return result;
}

}  // namespace chameleon::policy
