// Phase detection for profiles whose ops are not labelled forward/backward/optimizer.
#pragma once

#include <vector>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// Returns one phase per op. When any op of `profile` carries a label, labels are kept and
/// unlabelled ops inherit the label of the previous labelled op (the first ones: forward).
/// Otherwise (all kUnknown), heuristics on the tensor uses:
///  - backward starts at the first op that re-reads a tensor "saved" across the point where the
///    most tensors sit idle between two uses (the forward/backward turn: activations saved in the
///    forward are re-read in reverse order);
///  - the optimizer starts at the first op after the last such re-read that writes, in place, a
///    tensor live since the start of the iteration (a parameter);
///  - with no saved tensor at all the iteration is forward-only.
/// Pure; O(ops + uses).
std::vector<Phase> DetectPhases(const Profile& profile);

}  // namespace chameleon::policy
