#include "chameleon/policy/anchors.h"

#include <unordered_map>

namespace chameleon::policy {

std::vector<OpAnchor> AnchorOps(const Profile& profile) {
  std::vector<OpAnchor> anchors;
  anchors.reserve(profile.ops.size());
  std::unordered_map<std::uint32_t, std::uint32_t> seen;
  seen.reserve(256);
  for (const ProfileOp& op : profile.ops) {
    std::uint32_t& count = seen[op.token];
    anchors.push_back({op.token, count});
    ++count;
  }
  return anchors;
}

std::int64_t ResolveAnchor(const Profile& profile, OpAnchor anchor) {
  std::uint32_t count = 0;
  for (std::size_t i = 0; i < profile.ops.size(); ++i) {
    if (profile.ops[i].token != anchor.token) continue;
    if (count == anchor.occurrence) return static_cast<std::int64_t>(i);
    ++count;
  }
  return -1;
}

}  // namespace chameleon::policy
