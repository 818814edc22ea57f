#include "chameleon/policy/phases.h"

#include <algorithm>
#include <cstdint>

namespace chameleon::policy {
namespace {

bool AnyLabelled(const Profile& profile) {
  return std::any_of(profile.ops.begin(), profile.ops.end(),
                     [](const ProfileOp& op) { return op.phase != Phase::kUnknown; });
}

std::vector<Phase> FillLabels(const Profile& profile) {
  std::vector<Phase> phases(profile.ops.size());
  Phase last = Phase::kForward;
  for (std::size_t i = 0; i < profile.ops.size(); ++i) {
    if (profile.ops[i].phase != Phase::kUnknown) last = profile.ops[i].phase;
    phases[i] = last;
  }
  return phases;
}

// The op where the most tensors sit idle between two uses: the forward/backward turn.
// Returns ops.size() when no tensor has a gap (a forward-only iteration).
std::size_t FindTurn(const Profile& profile) {
  const std::size_t n = profile.ops.size();
  std::vector<std::int32_t> diff(n + 1, 0);
  for (const ProfileTensor& t : profile.tensors) {
    for (std::size_t k = 1; k < t.uses.size(); ++k) {
      if (t.uses[k] > t.uses[k - 1] + 1) {  // idle strictly inside (u_{k-1}, u_k)
        ++diff[t.uses[k - 1] + 1];
        --diff[t.uses[k]];
      }
    }
  }
  std::int32_t idle = 0;
  std::int32_t best = 0;
  std::size_t turn = n;
  for (std::size_t i = 0; i < n; ++i) {
    idle += diff[i];
    if (idle > best) {
      best = idle;
      turn = i;
    }
  }
  return turn;
}

}  // namespace

std::vector<Phase> DetectPhases(const Profile& profile) {
  if (AnyLabelled(profile)) return FillLabels(profile);
  const std::size_t n = profile.ops.size();
  std::vector<Phase> phases(n, Phase::kForward);
  const std::size_t turn = FindTurn(profile);
  if (turn >= n) return phases;
  // Backward: from the first re-read of a tensor idle across the turn to the last one.
  std::size_t backward_begin = n;
  std::size_t backward_last = 0;
  for (const ProfileTensor& t : profile.tensors) {
    for (std::size_t k = 1; k < t.uses.size(); ++k) {
      if (t.uses[k - 1] < turn && t.uses[k] > turn) {
        backward_begin = std::min<std::size_t>(backward_begin, t.uses[k]);
        backward_last = std::max<std::size_t>(backward_last, t.uses[k]);
      }
    }
  }
  if (backward_begin >= n) return phases;
  // Optimizer: the first in-place write of a tensor live since the iteration began (a
  // parameter or optimizer state) after the backward's last re-read.
  std::size_t optimizer_begin = n;
  for (std::size_t i = backward_last + 1; i < n && optimizer_begin == n; ++i) {
    for (std::uint32_t w : profile.ops[i].writes) {
      if (profile.tensors[w].alloc_op < 0) {
        optimizer_begin = i;
        break;
      }
    }
  }
  for (std::size_t i = backward_begin; i < n; ++i) {
    phases[i] = i < optimizer_begin ? Phase::kBackward : Phase::kOptimizer;
  }
  return phases;
}

}  // namespace chameleon::policy
