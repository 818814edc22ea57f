// The swap-policy generator: from one detailed iteration, which tensors to swap, when each
// transfer starts and where it completes, so the iteration fits the device with the least stall.
// Pure and deterministic: no I/O, no threads, no globals; every function is thread-safe on
// distinct arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/policy/options.h"
#include "chameleon/policy/plan.h"
#include "chameleon/policy/profile.h"

namespace chameleon::policy {

enum class GenerateStatus : std::uint8_t { kOk, kInvalidProfile, kInvalidOptions, kInfeasible };
const char* ToString(GenerateStatus status);

/// Either a plan (status kOk) or the reason there is none; never a plan that does not fit.
struct GenerateResult {
  GenerateStatus status = GenerateStatus::kOk;
  std::string message;  ///< empty on success; a one-line explanation otherwise
  Plan plan;            ///< filled only on kOk (phases/grid/memory also on kInfeasible)
  Infeasibility infeasibility;
  bool ok() const { return status == GenerateStatus::kOk; }
};

/// Runs phase detection, logical layers, the MRL, candidate scoring and the virtual-timeline
/// simulator until no op exceeds options.device_limit_bytes. See docs/policy.md.
/// Cost: O((ops + uses) + candidates · (log ops + layers)).
GenerateResult GeneratePlan(const Profile& profile, const GeneratorOptions& options);

/// The ipc form of `plan`: one SwapEntry per planned swap (sorted by the use of its swap-in,
/// folded onto one iteration, then by swap-out op), triggers anchored on (token, occurrence) per
/// policy/anchors.h, match keys per policy/matcher.h, and the summary's predictions. generation,
/// stage and boundary are the daemon's to fill.
ipc::Policy ToIpcPolicy(const Plan& plan, const Profile& profile);

}  // namespace chameleon::policy
