// Test support: random tiny iterations (<= 12 ops, <= 6 tensors) and random medium ones, built
// with a test-local PRNG so instances do not depend on library code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "chameleon/policy/options.h"
#include "chameleon/policy/profile.h"
#include "independent_replay.h"

namespace chameleon::policy::testing {

class TestRng {
 public:
  explicit TestRng(std::uint64_t seed) : state_(seed * 0x2545f4914f6cdd1dull + 1) {}
  std::uint64_t Next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }
  std::uint32_t Below(std::uint32_t n) { return static_cast<std::uint32_t>(Next() % n); }
  bool Chance(std::uint32_t percent) { return Below(100) < percent; }

 private:
  std::uint64_t state_;
};

struct Instance {
  Profile profile;
  GeneratorOptions options;
};

/// Tracked bytes live at op i (free_op included, as docs/profile-format.md defines
/// bytes_live_after), sometimes plus 50 untracked bytes.
inline void FillLiveAfter(Profile* p, TestRng* rng, std::uint32_t untracked_percent) {
  for (std::size_t i = 0; i < p->ops.size(); ++i) {
    std::uint64_t after = 0;
    for (const ProfileTensor& t : p->tensors) {
      if (t.alloc_op <= static_cast<std::int64_t>(i) &&
          (t.free_op < 0 || static_cast<std::int64_t>(i) <= t.free_op)) {
        after += t.bytes;
      }
    }
    p->ops[i].bytes_live_after = after + (rng->Chance(untracked_percent) ? 50 : 0);
  }
}

inline Profile RandomProfile(TestRng* rng, std::uint32_t ops, std::uint32_t tensors,
                             std::uint32_t max_uses) {
  Profile p;
  p.iteration_s = ops;  // 1 s per op keeps hand checks readable
  for (std::uint32_t i = 0; i < ops; ++i) {
    ProfileOp op;
    op.token = 1 + rng->Below(5);
    op.phase = i < ops / 2 ? Phase::kForward : Phase::kBackward;
    p.ops.push_back(op);
  }
  for (std::uint32_t k = 0; k < tensors; ++k) {
    ProfileTensor t;
    t.external_id = 100 + k;
    t.bytes = 100 * (1 + rng->Below(8));
    t.alloc_op = rng->Chance(33) ? -1 : static_cast<std::int32_t>(rng->Below(ops - 1));
    const std::uint32_t lo = t.alloc_op < 0 ? 0 : static_cast<std::uint32_t>(t.alloc_op);
    const std::uint32_t uses = 1 + rng->Below(max_uses);
    if (t.alloc_op >= 0) t.uses.push_back(lo);
    for (std::uint32_t u = 0; u < uses; ++u) t.uses.push_back(lo + rng->Below(ops - lo));
    std::sort(t.uses.begin(), t.uses.end());
    t.uses.erase(std::unique(t.uses.begin(), t.uses.end()), t.uses.end());
    t.free_op = rng->Chance(50) ? static_cast<std::int32_t>(t.uses.back()) : -1;
    t.swappable = !rng->Chance(10);
    for (std::uint32_t u : t.uses) p.ops[u].reads.push_back(k);
    p.tensors.push_back(t);
  }
  FillLiveAfter(&p, rng, 15);
  return p;
}

inline GeneratorOptions RandomOptions(TestRng* rng, const Profile& p) {
  GeneratorOptions o;
  static constexpr double kTransferOps[] = {0.25, 0.5, 1.0, 2.0, 3.0};
  o.host_bandwidth_bytes_per_s = 400.0 / kTransferOps[rng->Below(5)];  // 400 B in that many ops
  o.link_efficiency = rng->Chance(50) ? 1.0 : 0.8;
  o.full_duplex = !rng->Chance(25);
  static constexpr double kMargins[] = {0.0, 0.1, 0.25};
  o.prefetch_margin = kMargins[rng->Below(3)];
  o.min_swap_bytes = 0;
  o.layers_per_phase = 2 + rng->Below(5);
  // Between what no swap can remove (bytes used by an op, unswappable or untracked bytes) and
  // the peak, so most instances are worth solving.
  const std::vector<std::int64_t> mem = ReplayWithPlan(p, {});
  std::int64_t peak = 0, pinned = 0;
  for (std::size_t i = 0; i < mem.size(); ++i) {
    peak = std::max(peak, mem[i]);
    std::int64_t movable = 0;
    for (const ProfileTensor& t : p.tensors) {
      const bool live = t.alloc_op <= static_cast<std::int64_t>(i) &&
                        (t.free_op < 0 || static_cast<std::int64_t>(i) <= t.free_op);
      const bool used = std::find(t.uses.begin(), t.uses.end(), i) != t.uses.end();
      if (live && !used && t.swappable) movable += static_cast<std::int64_t>(t.bytes);
    }
    pinned = std::max(pinned, mem[i] - movable);
  }
  const std::int64_t span = std::max<std::int64_t>(peak - pinned, 0);
  o.device_limit_bytes = static_cast<std::uint64_t>(
      std::max<std::int64_t>(1, pinned + span * (10 + rng->Below(85)) / 100));
  return o;
}

/// <= 12 ops, <= 6 tensors.
inline Instance TinyInstance(std::uint64_t seed) {
  TestRng rng(seed);
  Instance in;
  in.profile = RandomProfile(&rng, 6 + rng.Below(7), 2 + rng.Below(5), 3);
  in.options = RandomOptions(&rng, in.profile);
  return in;
}

/// 40-200 ops, 8-40 tensors.
inline Instance MediumInstance(std::uint64_t seed) {
  TestRng rng(seed ^ 0xabcdef);
  Instance in;
  in.profile = RandomProfile(&rng, 40 + rng.Below(161), 8 + rng.Below(33), 5);
  in.options = RandomOptions(&rng, in.profile);
  in.options.layers_per_phase = 4 + rng.Below(20);
  return in;
}

}  // namespace chameleon::policy::testing
