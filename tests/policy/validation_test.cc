// Profiles come from files and shared memory: corrupted ones must be rejected or planned
// correctly, never crash (run under ASan/UBSan with the `sanitize` label).
#include <gtest/gtest.h>

#include "chameleon/policy/generator.h"
#include "chameleon/policy/matcher.h"
#include "chameleon/policy/memory.h"
#include "independent_replay.h"
#include "tiny_instances.h"

namespace chameleon::policy {
namespace {

void Corrupt(Profile* p, testing::TestRng* rng) {
  const auto any = [&] { return static_cast<std::uint32_t>(rng->Next()); };
  ProfileTensor& t = p->tensors[rng->Below(static_cast<std::uint32_t>(p->tensors.size()))];
  switch (rng->Below(8)) {
    case 0:
      t.uses.push_back(any());
      break;  // out of range
    case 1:
      std::reverse(t.uses.begin(), t.uses.end());
      break;  // unsorted
    case 2:
      t.alloc_op = static_cast<std::int32_t>(any());
      break;  // anything
    case 3:
      t.free_op = static_cast<std::int32_t>(rng->Below(3)) - 2;
      break;  // -2..0
    case 4:
      p->ops[rng->Below(static_cast<std::uint32_t>(p->ops.size()))].reads.push_back(any());
      break;
    case 5:
      t.bytes = rng->Chance(50) ? 0 : ~0ull >> rng->Below(8);
      break;  // huge sizes
    case 6:
      p->iteration_s = rng->Chance(50) ? 0 : -1;
      break;
    default:
      t.uses.insert(t.uses.begin(), t.uses.empty() ? 0 : t.uses.front());
      break;  // dup
  }
}

TEST(PolicyValidation, ShouldRejectOrCorrectlyPlanCorruptedProfiles) {
  std::uint32_t rejected = 0, planned = 0;
  for (std::uint64_t seed = 1; seed <= 500; ++seed) {
    testing::Instance in = testing::MediumInstance(seed);
    testing::TestRng rng(seed);
    for (std::uint32_t k = 0; k <= rng.Below(3); ++k) Corrupt(&in.profile, &rng);
    const GenerateResult r = GeneratePlan(in.profile, in.options);
    if (r.status == GenerateStatus::kInvalidProfile) {
      EXPECT_FALSE(r.message.empty());
      ++rejected;
      continue;
    }
    // Accepted (e.g. a huge but consistent size): the plan must still be right.
    ASSERT_EQ(ValidateProfile(in.profile), "");
    if (r.ok()) {
      ++planned;
      EXPECT_EQ(testing::JudgePlan(in.profile, r.plan.swaps, in.options.device_limit_bytes), "")
          << "seed " << seed;
    }
    (void)ComputeFeatures(in.profile);
  }
  EXPECT_GT(rejected, 300u);
}

}  // namespace
}  // namespace chameleon::policy
