// Op anchors: (token, occurrence) instead of raw op indices.
//
// The occurrence of op i is the number of ops before i in the same iteration (index 0 = first op
// after the iteration boundary) that carry the same token; it is 0-based. An op inserted with a
// new token shifts nothing; an op inserted with an existing token shifts only the later
// occurrences of that one token. This is the rule the shim uses to fire triggers.
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

struct OpAnchor {
  std::uint32_t token = 0;
  std::uint32_t occurrence = 0;
  friend bool operator==(const OpAnchor&, const OpAnchor&) = default;
};

/// The anchor of every op of `profile`, in op order. O(ops) expected.
std::vector<OpAnchor> AnchorOps(const Profile& profile);

/// The op index `anchor` designates in `profile`, or -1 when that token does not occur that often.
std::int64_t ResolveAnchor(const Profile& profile, OpAnchor anchor);

}  // namespace chameleon::policy
