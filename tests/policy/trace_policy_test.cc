// Policies on the shared real traces (../shared/traces), read through tools/trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chameleon/policy/anchors.h"
#include "chameleon/policy/generator.h"
#include "chameleon/policy/matcher.h"
#include "chameleon/policy/memory.h"
#include "chameleon/policy/phases.h"
#include "chameleon/policy/synthetic.h"
#include "chameleon/trace/profile_builder.h"
#include "independent_replay.h"

namespace chameleon::policy {
namespace {

const std::string kTraces = std::string(CHAMELEON_TRACES_DIR) + "/";

const Profile& ResNet() {
  static const Profile p = trace::ProfileFromTraceFile(kTraces + "resnet_1gpu_et.json.gz");
  return p;
}

const Profile& Megatron() {
  static const Profile p = trace::ProfileFromTraceFile(kTraces + "megatron_et_0.json.gz");
  return p;
}

std::uint64_t Peak(const Profile& p) {
  const std::vector<std::uint64_t> mem = ReplayMemory(p);
  return *std::max_element(mem.begin(), mem.end());
}

void ExpectValidPlan(const Profile& p, const GenerateResult& r, std::uint64_t limit) {
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(testing::JudgePlan(p, r.plan.swaps, limit), "");
  EXPECT_LE(r.plan.predicted_peak_bytes, limit);
  EXPECT_DOUBLE_EQ(r.plan.predicted_iteration_s, p.iteration_s + r.plan.predicted_stall_s);
  const ipc::Policy policy = ToIpcPolicy(r.plan, p);
  ASSERT_EQ(policy.entries.size(), r.plan.swaps.size());
  const auto n = static_cast<std::int64_t>(p.ops.size());
  // Entries come in the order of their uses folded onto one iteration (docs/policy.md).
  std::vector<PlannedSwap> swaps = r.plan.swaps;
  std::sort(swaps.begin(), swaps.end(), [n](const PlannedSwap& a, const PlannedSwap& b) {
    if (a.use_op % n != b.use_op % n) return a.use_op % n < b.use_op % n;
    return a.out_after_op != b.out_after_op ? a.out_after_op < b.out_after_op : a.tensor < b.tensor;
  });
  for (std::size_t i = 0; i < swaps.size(); ++i) {
    const ipc::SwapEntry& e = policy.entries[i];
    // Anchors resolve to the planned ops; ops of the next iteration (>= n) by the same anchor.
    EXPECT_EQ(ResolveAnchor(p, {e.out_token, e.out_occurrence}), swaps[i].out_after_op);
    EXPECT_EQ(ResolveAnchor(p, {e.in_token, e.in_occurrence}), swaps[i].in_start_op % n);
    EXPECT_EQ(ResolveAnchor(p, {e.use_token, e.use_occurrence}), swaps[i].use_op % n);
  }
}

TEST(PolicyTraces, ShouldFitResNetInHalfAndAThirdOfItsPeakWithPredictedStall) {
  const Profile& p = ResNet();
  ASSERT_EQ(ValidateProfile(p), "");
  const std::uint64_t peak = Peak(p);
  double previous_stall = 0;
  for (std::uint64_t divisor : {2u, 3u}) {
    GeneratorOptions o;  // PCIe 4 x16 at 80 % efficiency, C = 0.7, margin 0.1
    o.device_limit_bytes = peak / divisor;
    const GenerateResult r = GeneratePlan(p, o);
    ExpectValidPlan(p, r, o.device_limit_bytes);
    std::printf("resnet 1/%llu of %.0f MiB: %zu swaps, stall %.4f s on a %.4f s iteration\n",
                static_cast<unsigned long long>(divisor), peak / 1048576.0, r.plan.swaps.size(),
                r.plan.predicted_stall_s, p.iteration_s);
    RecordProperty("stall_1_" + std::to_string(divisor), std::to_string(r.plan.predicted_stall_s));
    // Less memory cannot cost less transfer time than more memory.
    EXPECT_GE(r.plan.predicted_stall_s, previous_stall);
    previous_stall = r.plan.predicted_stall_s;
  }
}

TEST(PolicyTraces, ShouldExplainWhyResNetCannotFitInATenthOfItsPeak) {
  const Profile& p = ResNet();
  GeneratorOptions o;
  o.device_limit_bytes = Peak(p) / 10;
  const GenerateResult r = GeneratePlan(p, o);
  ASSERT_EQ(r.status, GenerateStatus::kInfeasible);
  EXPECT_TRUE(r.plan.swaps.empty());
  EXPECT_GT(r.infeasibility.bytes_missing, 0u);
  ASSERT_FALSE(r.infeasibility.largest_unswappable.empty());
  EXPECT_STREQ(r.infeasibility.largest_unswappable[0].reason, "used by this op");
}

// Megatron's trace is forward-only: 74 % of its peak are weights used once per iteration and
// nothing is re-read by a backward. Within one iteration the only idle intervals are short
// within-forward ones, so the generator can trim the peak by ~2 % and must say why it cannot go
// lower. Across iterations (cross_iteration, the default) each weight is idle from its use to its
// use in the next iteration: swapping those is weight streaming, and 1/2 of the peak fits with a
// predicted stall (the link cannot hide 1.5 GB per 54 ms iteration).
TEST(PolicyTraces, ShouldOnlyTrimTheForwardOnlyMegatronPeakWithinAnIteration) {
  const Profile& p = Megatron();
  for (Phase phase : DetectPhases(p)) ASSERT_EQ(phase, Phase::kForward);
  const std::uint64_t peak = Peak(p);
  GeneratorOptions o;
  o.cross_iteration = false;
  o.device_limit_bytes = peak / 100 * 99;
  const GenerateResult trimmed = GeneratePlan(p, o);
  ExpectValidPlan(p, trimmed, o.device_limit_bytes);
  EXPECT_FALSE(trimmed.plan.swaps.empty());

  o.device_limit_bytes = peak / 2;
  const GenerateResult half = GeneratePlan(p, o);
  ASSERT_EQ(half.status, GenerateStatus::kInfeasible);
  EXPECT_TRUE(half.plan.swaps.empty());
  const auto& listed = half.infeasibility.largest_unswappable;
  EXPECT_TRUE(std::any_of(listed.begin(), listed.end(), [](const UnswappableTensor& t) {
    return std::string(t.reason) == "not between two uses in the iteration";
  })) << half.message;
  EXPECT_GT(half.infeasibility.bytes_missing, peak / 4);
  std::printf("megatron at 1/2 within one iteration: %s\n", half.message.c_str());
}

TEST(PolicyTraces, ShouldStreamMegatronWeightsAcrossIterationsAtHalfItsPeak) {
  const Profile& p = Megatron();
  const std::uint64_t peak = Peak(p);
  GeneratorOptions o;
  o.device_limit_bytes = peak / 2;
  const GenerateResult half = GeneratePlan(p, o);
  ExpectValidPlan(p, half, o.device_limit_bytes);
  ASSERT_FALSE(half.plan.swaps.empty());
  for (const PlannedSwap& s : half.plan.swaps) EXPECT_TRUE(s.wraps(p.ops.size()));
  EXPECT_GT(half.plan.predicted_stall_s, 0.0);
  std::printf("megatron 1/2 across iterations: %zu swaps, stall %.4f s on a %.4f s iteration\n",
              half.plan.swaps.size(), half.plan.predicted_stall_s, p.iteration_s);
  // A fifth of the peak is below what the ops themselves touch at the peak: explained, no plan.
  o.device_limit_bytes = peak / 5;
  const GenerateResult fifth = GeneratePlan(p, o);
  ASSERT_EQ(fifth.status, GenerateStatus::kInfeasible);
  EXPECT_TRUE(fifth.plan.swaps.empty());
  EXPECT_FALSE(fifth.message.empty());
}

// At a quarter of its peak the Megatron trace's attention holds three 256 MiB tensors (the
// scores, the mask buffer live across iterations, the probabilities) while no op touches more
// than two: one of them must be off for an op or two in every layer, a gap shorter than two
// logical layers. With the executor's accounting the planner finds those gaps (their transfers
// stall); without short gaps it explains why it cannot fit (issue 18: the daemon reached STABLE
// with no plan at that limit).
TEST(PolicyTraces, ShouldFitMegatronInAQuarterOfItsPeakWithShortGaps) {
  const Profile& p = Megatron();
  GeneratorOptions o;
  o.device_limit_bytes = Peak(p) / 4;
  o.chunk_bytes = 2u << 20;
  o.reserve_bytes = 8u << 20;
  o.release_at_issue = true;
  o.short_gaps = false;
  const GenerateResult paper = GeneratePlan(p, o);
  ASSERT_EQ(paper.status, GenerateStatus::kInfeasible);
  const auto& listed = paper.infeasibility.largest_unswappable;
  EXPECT_TRUE(std::any_of(listed.begin(), listed.end(), [](const UnswappableTensor& t) {
    return std::string(t.reason) == "idle for less than two logical layers";
  })) << paper.message;

  o.short_gaps = true;
  const GenerateResult r = GeneratePlan(p, o);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(testing::JudgePlan(p, r.plan.swaps, o.device_limit_bytes - o.reserve_bytes), "");
  EXPECT_LE(r.plan.predicted_peak_bytes, o.device_limit_bytes - o.reserve_bytes);
  EXPECT_GT(r.plan.predicted_stall_s, 0.0);
  std::uint64_t moved = 0;
  for (const PlannedSwap& s : r.plan.swaps) moved += s.bytes;
  std::printf(
      "megatron 1/4 with short gaps: %zu swaps, %.2f GB each way, stall %.4f s on a %.4f s "
      "iteration\n",
      r.plan.swaps.size(), moved / 1e9, r.plan.predicted_stall_s, p.iteration_s);
}

// The trace reader labels phases from autograd; the heuristic must find the same split when the
// labels are removed (measured: 1,076 of 1,088 ops agree; backward found 9 ops late).
TEST(PolicyTraces, ShouldDetectResNetPhasesWithoutLabels) {
  const Profile& labelled = ResNet();
  Profile bare = labelled;
  for (ProfileOp& op : bare.ops) op.phase = Phase::kUnknown;
  const std::vector<Phase> detected = DetectPhases(bare);
  std::size_t agree = 0, labelled_backward = 0, detected_backward = 0;
  for (std::size_t i = detected.size(); i-- > 0;) {
    agree += detected[i] == labelled.ops[i].phase;
    if (labelled.ops[i].phase == Phase::kBackward) labelled_backward = i;
    if (detected[i] == Phase::kBackward) detected_backward = i;
  }
  EXPECT_GE(agree * 100, detected.size() * 98);
  const auto drift = static_cast<double>(detected_backward) - labelled_backward;
  EXPECT_LE(std::abs(drift), 0.02 * detected.size());
}

double CorrectFraction(const std::vector<std::int32_t>& match, std::size_t originals) {
  std::size_t correct = 0;
  for (std::size_t t = 0; t < originals; ++t) correct += match[t] == static_cast<std::int32_t>(t);
  return static_cast<double>(correct) / originals;
}

TEST(PolicyTraces, ShouldMatchTensorsOfTheRealTracesAcrossIterations) {
  for (const Profile* p : {&ResNet(), &Megatron()}) {
    const Matcher matcher(ComputeFeatures(*p));
    const Profile same = *p;
    EXPECT_GE(CorrectFraction(matcher.Match(ComputeFeatures(same)), p->tensors.size()), 0.99);
    for (std::uint64_t seed : {11u, 12u, 13u}) {
      const Profile perturbed = InsertOps(*p, 0.02, seed);
      const double fraction =
          CorrectFraction(matcher.Match(ComputeFeatures(perturbed)), p->tensors.size());
      EXPECT_GE(fraction, 0.95) << p->source << " seed " << seed;
      std::printf("%s: %.4f matched with 2%% ops inserted (seed %llu)\n", p->source.c_str(),
                  fraction, static_cast<unsigned long long>(seed));
    }
  }
}

}  // namespace
}  // namespace chameleon::policy
