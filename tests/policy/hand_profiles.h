// Test support: hand-written profiles (a tensor from its size, lifetime and uses; the six-op
// iteration docs/policy.md walks through) shared by hand_cases_test and executor_model_test.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "chameleon/policy/options.h"
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

// 6 ops, 1 s each, forward 0-2 / backward 3-5, one logical layer per op.
// C (100 B) is used by every op; A (100 B) is used at 0 and 5; B (100 B) lives over ops 2-3.
// Memory: 200 200 300 300 200 200; limit 250 -> MRL = {op 2: 50, op 3: 50}.
inline Profile SixOps(std::uint32_t a_next_use) {
  Profile p;
  p.iteration_s = 6;
  const std::uint32_t tokens[] = {10, 11, 12, 12, 11, 10};
  for (std::uint32_t i = 0; i < 6; ++i) {
    ProfileOp op;
    op.token = tokens[i];
    op.phase = i < 3 ? Phase::kForward : Phase::kBackward;
    p.ops.push_back(op);
  }
  p.tensors.push_back(Tensor(100, 0, static_cast<std::int32_t>(a_next_use), {0, a_next_use}));
  p.tensors.push_back(Tensor(100, 2, 3, {2, 3}));
  p.tensors.push_back(Tensor(100, -1, -1, {0, 1, 2, 3, 4, 5}));
  return p;
}

inline GeneratorOptions HandOptions(double bandwidth) {
  GeneratorOptions o;
  o.device_limit_bytes = 250;
  o.host_bandwidth_bytes_per_s = bandwidth;
  o.link_efficiency = 1.0;
  o.prefetch_margin = 0.0;
  o.min_swap_bytes = 0;
  o.layers_per_phase = 3;
  return o;
}

}  // namespace chameleon::policy::testing
