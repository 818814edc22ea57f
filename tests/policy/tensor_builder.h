// Test support: one profile tensor from its size, lifetime and uses, for hand-written profiles.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "chameleon/policy/profile.h"

namespace chameleon::policy::testing {

/// A tensor of `bytes` allocated at op `alloc`, freed at `free`, read by `uses`; its size doubles
/// as its external id (hand-written profiles use distinct sizes).
inline ProfileTensor Tensor(std::uint64_t bytes, std::int32_t alloc, std::int32_t free,
                            std::vector<std::uint32_t> uses, bool swappable = true) {
  ProfileTensor t;
  t.external_id = bytes;
  t.bytes = bytes;
  t.alloc_op = alloc;
  t.free_op = free;
  t.uses = std::move(uses);
  t.swappable = swappable;
  return t;
}

}  // namespace chameleon::policy::testing
