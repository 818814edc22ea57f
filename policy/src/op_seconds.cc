#include "chameleon/policy/op_seconds.h"

namespace chameleon::policy {

bool HasOpTimes(const Profile& profile) {
  for (const ProfileOp& op : profile.ops) {
    if (op.device_s > 0) return true;
  }
  return false;
}

std::vector<double> OpSeconds(const Profile& profile) {
  const std::size_t n = profile.ops.size();
  std::vector<double> out(n, 0.0);
  if (n == 0) return out;
  if (!HasOpTimes(profile)) {
    const double each = profile.iteration_s / static_cast<double>(n);
    for (double& s : out) s = each;
    return out;
  }
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = profile.ops[i].device_s > 0 ? profile.ops[i].device_s : 0.0;
  }
  return out;
}

}  // namespace chameleon::policy
