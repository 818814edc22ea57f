// Internal: explaining why no plan fits.
#pragma once

#include <string>

#include "chameleon/policy/options.h"
#include "chameleon/policy/plan.h"
#include "chameleon/policy/profile.h"

namespace chameleon::policy::detail {

/// The worst op of `plan` (with its swaps applied) and the largest tensors live there that are
/// still on the device, each with the reason it could not be swapped around that op.
Infeasibility ExplainInfeasibility(const Profile& profile, const Plan& plan,
                                   const GeneratorOptions& options);

/// One line: bytes missing, where, how many ops over the limit, the largest unswappable tensors.
std::string InfeasibilityMessage(const Profile& profile, const Infeasibility& infeasibility);

}  // namespace chameleon::policy::detail
