// Placement: where one swapped-out copy lives — local host memory, a peer GPU, or pinned host
// memory on a named NUMA node (ipc::Tier and its helper) — and the CHAMELEON_PLACEMENT mode.
//
// Plain values: thread-safe to copy.
#pragma once

#include <cstdint>

#include "chameleon/ipc/policy_blob.h"

namespace chameleon::shim::swap {

struct Placement {
  ipc::Tier tier = ipc::Tier::kHost;
  std::uint16_t helper = 0;  ///< the peer's device ordinal (this process's) or the NUMA node
  bool host() const { return tier == ipc::Tier::kHost; }
  bool operator==(const Placement&) const = default;
};

/// CHAMELEON_PLACEMENT: `auto` follows the policy's tiers (within its leases); `host` sends every
/// swapped byte to local host memory whatever the policy says.
enum class PlacementMode : std::uint8_t { kAuto, kHost };

/// The placement a policy entry asks for; tiers this build does not know are host memory (a
/// tier is only a preference, so a newer daemon's tier must never fail a swap-out).
inline Placement PlacementOf(const ipc::SwapEntry& e) {
  switch (static_cast<ipc::Tier>(e.tier)) {
    case ipc::Tier::kPeerGpu:
    case ipc::Tier::kHostNuma:
      return Placement{static_cast<ipc::Tier>(e.tier), e.helper};
    default:
      return Placement{};
  }
}

}  // namespace chameleon::shim::swap
