// Small iterations computed by hand (docs/policy.md walks through the first one).
#include <gtest/gtest.h>

#include <limits>

#include "chameleon/policy/anchors.h"
#include "chameleon/policy/candidates.h"
#include "chameleon/policy/generator.h"
#include "hand_profiles.h"
#include "independent_replay.h"

namespace chameleon::policy {
namespace {

using testing::HandOptions;
using testing::SixOps;
using testing::Tensor;

TEST(PolicyHandCases, ShouldSwapTheIdleTensorWithoutStallWhenTheLinkHasRoom) {
  const Profile p = SixOps(5);
  // 200 B/s: each transfer takes 0.5 s. Swap-out after op 0 ends in layer 1, so A is off from
  // op 2; the last op over the limit is 3, so the swap-in goes in layer 4 (room 1 s >= 0.5 s).
  const GenerateResult r = GeneratePlan(p, HandOptions(200));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.plan.swaps.size(), 1u);
  const PlannedSwap& s = r.plan.swaps[0];
  EXPECT_EQ(s.tensor, 0u);
  EXPECT_EQ(s.out_after_op, 0u);
  EXPECT_EQ(s.free_from_op, 2u);
  EXPECT_EQ(s.in_start_op, 4u);
  EXPECT_EQ(s.use_op, 5u);
  EXPECT_DOUBLE_EQ(s.transfer_s, 0.5);
  EXPECT_DOUBLE_EQ(s.stall_s, 0.0);
  EXPECT_EQ(r.plan.peak_before_bytes, 300u);
  EXPECT_EQ(r.plan.predicted_peak_bytes, 200u);
  EXPECT_DOUBLE_EQ(r.plan.predicted_iteration_s, 6.0);
  EXPECT_EQ(r.plan.memory_after, (std::vector<std::uint64_t>{200, 200, 200, 200, 200, 200}));
  // Anchors: op 0 = token 10 #0, op 4 = token 11 #1, op 5 = token 10 #1.
  const ipc::Policy policy = ToIpcPolicy(r.plan, p);
  ASSERT_EQ(policy.entries.size(), 1u);
  const ipc::SwapEntry& e = policy.entries[0];
  EXPECT_EQ(e.out_token, 10u);
  EXPECT_EQ(e.out_occurrence, 0u);
  EXPECT_EQ(e.in_token, 11u);
  EXPECT_EQ(e.in_occurrence, 1u);
  EXPECT_EQ(e.use_token, 10u);
  EXPECT_EQ(e.use_occurrence, 1u);
  EXPECT_EQ(e.bytes, 100u);
  EXPECT_EQ(e.use_count, 2u);
  EXPECT_EQ(e.token_tag, 1u << 10);
  EXPECT_EQ(e.tier, static_cast<std::uint16_t>(ipc::Tier::kHost));
  EXPECT_EQ(policy.summary.predicted_peak_bytes, 200u);
  EXPECT_EQ(policy.summary.device_limit_bytes, 250u);
  EXPECT_EQ(policy.summary.iteration_ops, 6u);
  EXPECT_DOUBLE_EQ(policy.summary.predicted_stall_s, 0.0);
}

TEST(PolicyHandCases, ShouldPredictAStallWhenThePeakIsRightBeforeTheUse) {
  // A's next use is op 4: the last op over the limit (3) is the layer just before it, so the
  // swap-in cannot overlap anything: 1 s transfer (100 B/s) = 1 s stall.
  const Profile p = SixOps(4);
  const GenerateResult r = GeneratePlan(p, HandOptions(100));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.plan.swaps.size(), 1u);
  EXPECT_EQ(r.plan.swaps[0].free_from_op, 2u);
  EXPECT_EQ(r.plan.swaps[0].in_start_op, 4u);
  EXPECT_DOUBLE_EQ(r.plan.swaps[0].stall_s, 1.0);
  EXPECT_DOUBLE_EQ(r.plan.predicted_stall_s, 1.0);
  EXPECT_DOUBLE_EQ(r.plan.predicted_iteration_s, 7.0);
}

TEST(PolicyHandCases, ShouldStallTheSwapOutWhenTheLinkCannotFinishItBeforeThePeak) {
  // 80 B/s: a transfer takes 1.25 s. Overlapped, the swap-out would span layers 1-2 and leave
  // op 2 over the limit. Stalled instead: layer 1 carries 1 s, op 2 waits 0.25 s for the rest;
  // the swap-in gets layer 4 (1 s of 1.25 s) and op 5 waits 0.25 s. Total stall 0.5 s.
  const Profile p = SixOps(5);
  const GenerateResult r = GeneratePlan(p, HandOptions(80));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.plan.swaps.size(), 1u);
  const PlannedSwap& s = r.plan.swaps[0];
  EXPECT_EQ(s.tensor, 0u);
  EXPECT_EQ(s.free_from_op, 2u);
  EXPECT_EQ(s.in_start_op, 4u);
  EXPECT_DOUBLE_EQ(s.out_stall_s, 0.25);
  EXPECT_DOUBLE_EQ(s.stall_s, 0.5);
  EXPECT_DOUBLE_EQ(r.plan.predicted_iteration_s, 6.5);
  EXPECT_EQ(r.plan.predicted_peak_bytes, 200u);
}

TEST(PolicyHandCases, ShouldTimeEachDirectionOnItsOwnBandwidth) {
  // The stalled swap-out case above, with only the device -> host side slow: 80 B/s out (1.25 s:
  // layer 1 carries 1 s, op 2 waits 0.25 s) and 200 B/s in (0.5 s, hidden in layer 4).
  GeneratorOptions o = HandOptions(1);  // the one-size figure is overridden both ways
  o.device_to_host_bytes_per_s = 80;
  o.host_to_device_bytes_per_s = 200;
  const GenerateResult slow_out = GeneratePlan(SixOps(5), o);
  ASSERT_TRUE(slow_out.ok()) << slow_out.message;
  ASSERT_EQ(slow_out.plan.swaps.size(), 1u);
  EXPECT_DOUBLE_EQ(slow_out.plan.swaps[0].transfer_s, 1.25);
  EXPECT_DOUBLE_EQ(slow_out.plan.swaps[0].in_transfer_s, 0.5);
  EXPECT_DOUBLE_EQ(slow_out.plan.swaps[0].out_stall_s, 0.25);
  EXPECT_DOUBLE_EQ(slow_out.plan.swaps[0].stall_s, 0.25);
  EXPECT_DOUBLE_EQ(slow_out.plan.predicted_iteration_s, 6.25);
  // The other way round: the swap-out fits layer 1 (0.5 s) and the swap-in's 1.25 s gets layer 4
  // (1 s): op 5 waits 0.25 s.
  o.device_to_host_bytes_per_s = 200;
  o.host_to_device_bytes_per_s = 80;
  const GenerateResult slow_in = GeneratePlan(SixOps(5), o);
  ASSERT_TRUE(slow_in.ok()) << slow_in.message;
  ASSERT_EQ(slow_in.plan.swaps.size(), 1u);
  EXPECT_DOUBLE_EQ(slow_in.plan.swaps[0].out_stall_s, 0.0);
  EXPECT_DOUBLE_EQ(slow_in.plan.swaps[0].stall_s, 0.25);
  EXPECT_DOUBLE_EQ(slow_in.plan.predicted_iteration_s, 6.25);
}

TEST(PolicyHandCases, ShouldRefuseANegativeOrNonFinitePerDirectionBandwidth) {
  GeneratorOptions o = HandOptions(200);
  o.host_to_device_bytes_per_s = -1;
  EXPECT_EQ(GeneratePlan(SixOps(5), o).status, GenerateStatus::kInvalidOptions);
  o.host_to_device_bytes_per_s = 0;
  o.device_to_host_bytes_per_s = std::numeric_limits<double>::infinity();
  EXPECT_EQ(GeneratePlan(SixOps(5), o).status, GenerateStatus::kInvalidOptions);
}

TEST(PolicyHandCases, ShouldReportBytesMissingWhenAnOpNeedsMoreThanTheLimit) {
  // Limit 199: op 0 uses A and C (200 B), op 2 uses B and C: no swap can help there.
  GeneratorOptions o = HandOptions(200);
  o.device_limit_bytes = 199;
  const GenerateResult r = GeneratePlan(SixOps(5), o);
  ASSERT_EQ(r.status, GenerateStatus::kInfeasible);
  EXPECT_TRUE(r.plan.swaps.empty());
  EXPECT_EQ(r.infeasibility.bytes_missing, 1u);
  EXPECT_EQ(r.infeasibility.at_op, 0u);
  EXPECT_GE(r.infeasibility.ops_over_limit, 4u);
  ASSERT_EQ(r.infeasibility.largest_unswappable.size(), 2u);
  EXPECT_EQ(r.infeasibility.largest_unswappable[0].tensor, 0u);
  EXPECT_STREQ(r.infeasibility.largest_unswappable[0].reason, "used by this op");
  EXPECT_EQ(r.infeasibility.largest_unswappable[1].tensor, 2u);
  EXPECT_NE(r.message.find("1 bytes still over the limit at op 0 (token 10)"), std::string::npos)
      << r.message;
}

TEST(PolicyHandCases, ShouldReturnNoSwapsWhenTheIterationFits) {
  GeneratorOptions o = HandOptions(200);
  o.device_limit_bytes = 300;
  const GenerateResult r = GeneratePlan(SixOps(5), o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.plan.swaps.empty());
  EXPECT_EQ(r.plan.predicted_peak_bytes, 300u);
}

// 10 ops, one layer each. C (100 B) used everywhere; A (100 B) used at 0 and 9; D (300 B) used at
// 1 and 8; E1 (100 B) over ops 4-5; E2 (100 B) at op 8. Memory 500 except 600 at ops 4, 5, 8;
// limit 550. A's gap holds 3 MRL entries, D's 2: score(A) = 1 + C/3, score(D) = 2/3 + C.
Profile TenOps() {
  Profile p;
  p.iteration_s = 10;
  for (std::uint32_t i = 0; i < 10; ++i) {
    ProfileOp op;
    op.token = i;
    op.phase = i < 5 ? Phase::kForward : Phase::kBackward;
    p.ops.push_back(op);
  }
  p.tensors.push_back(Tensor(100, -1, -1, {0, 9}));                          // A
  p.tensors.push_back(Tensor(300, -1, -1, {1, 8}));                          // D
  p.tensors.push_back(Tensor(100, -1, -1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));  // C
  p.tensors.push_back(Tensor(100, 4, 5, {4, 5}));                            // E1
  p.tensors.push_back(Tensor(100, 8, 8, {8}));                               // E2
  return p;
}

GeneratorOptions TenOpOptions(double size_weight) {
  GeneratorOptions o = HandOptions(1e6);  // 100 B take 1e-4 s
  o.device_limit_bytes = 550;
  o.layers_per_phase = 5;
  o.size_weight = size_weight;
  return o;
}

TEST(PolicyHandCases, ShouldOrderCandidatesByMreCountPlusWeightedSize) {
  const Profile p = TenOps();
  const GenerateResult r = GeneratePlan(p, TenOpOptions(0.7));
  ASSERT_TRUE(r.ok()) << r.message;
  // C = 0.7: D (1.367) before A (1.233). D: off ops 3-6, swap-in in layer 7, no stall. Op 8 is
  // still over, so A follows: off ops 2-8, swap-in right before op 9 (the peak is op 8) = stall.
  ASSERT_EQ(r.plan.swaps.size(), 2u);
  EXPECT_EQ(r.plan.swaps[0].tensor, 1u);
  EXPECT_NEAR(r.plan.swaps[0].score, 2.0 / 3 + 0.7, 1e-12);
  EXPECT_EQ(r.plan.swaps[0].free_from_op, 3u);
  EXPECT_EQ(r.plan.swaps[0].in_start_op, 7u);
  EXPECT_DOUBLE_EQ(r.plan.swaps[0].stall_s, 0.0);
  EXPECT_EQ(r.plan.swaps[1].tensor, 0u);
  EXPECT_NEAR(r.plan.swaps[1].score, 1 + 0.7 / 3, 1e-12);
  EXPECT_EQ(r.plan.swaps[1].free_from_op, 2u);
  EXPECT_EQ(r.plan.swaps[1].in_start_op, 9u);
  // A's swap-in is issued at op 9's start (t = 9 s) and waited for at once: 1e-4 s, replayed
  // on a clock that adds 1 s per op (hence not bit-exact).
  EXPECT_NEAR(r.plan.predicted_stall_s, 1e-4, 1e-12);
  EXPECT_EQ(testing::JudgePlan(p, r.plan.swaps, 550), "");
}

TEST(PolicyHandCases, ShouldPreferTheTensorIdleAcrossMoreEntriesWhenSizeWeightIsZero) {
  const Profile p = TenOps();
  const GenerateResult r = GeneratePlan(p, TenOpOptions(0.0));
  ASSERT_TRUE(r.ok()) << r.message;
  // C = 0: A (1.0) before D (0.667); A alone covers ops 4, 5 and 8.
  ASSERT_EQ(r.plan.swaps.size(), 1u);
  EXPECT_EQ(r.plan.swaps[0].tensor, 0u);
  EXPECT_EQ(r.plan.swaps[0].free_from_op, 2u);
  EXPECT_EQ(r.plan.swaps[0].in_start_op, 9u);
  EXPECT_EQ(r.plan.predicted_peak_bytes, 500u);
}

// P (100 B) lives across iterations and is used once, by op 1; C (100 B) is used by every op;
// B (100 B) lives over ops 3-4. Memory 200 200 200 300 300 200; limit 250.
Profile AcrossIterations() {
  Profile p = SixOps(5);
  p.tensors.clear();
  p.tensors.push_back(Tensor(100, -1, -1, {1}));                 // P
  p.tensors.push_back(Tensor(100, -1, -1, {0, 1, 2, 3, 4, 5}));  // C
  p.tensors.push_back(Tensor(100, 3, 4, {3, 4}));                // B
  return p;
}

TEST(PolicyHandCases, ShouldSwapAcrossTheIterationBoundaryWhenTheOnlyGapWraps) {
  const Profile p = AcrossIterations();
  // 0.5 s transfers. Out after op 1, done in layer 2, P off from op 3; the last op over the limit
  // is 4, so the swap-in goes in the first layer of the next iteration (virtual op 6 = op 0),
  // ahead of the use at op 1 of the next iteration (virtual op 7).
  const GenerateResult r = GeneratePlan(p, HandOptions(200));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.plan.swaps.size(), 1u);
  const PlannedSwap& s = r.plan.swaps[0];
  EXPECT_EQ(s.tensor, 0u);
  EXPECT_EQ(s.out_after_op, 1u);
  EXPECT_EQ(s.free_from_op, 3u);
  EXPECT_EQ(s.in_start_op, 6u);
  EXPECT_EQ(s.use_op, 7u);
  EXPECT_TRUE(s.wraps(p.ops.size()));
  EXPECT_DOUBLE_EQ(s.stall_s, 0.0);
  EXPECT_EQ(r.plan.memory_after, (std::vector<std::uint64_t>{200, 200, 200, 200, 200, 100}));
  EXPECT_EQ(testing::JudgePlan(p, r.plan.swaps, 250), "");
  const ipc::Policy policy = ToIpcPolicy(r.plan, p);
  ASSERT_EQ(policy.entries.size(), 1u);
  EXPECT_EQ(policy.entries[0].out_token, 11u);  // op 1
  EXPECT_EQ(policy.entries[0].out_occurrence, 0u);
  EXPECT_EQ(policy.entries[0].in_token, 10u);  // op 0 of the next iteration
  EXPECT_EQ(policy.entries[0].in_occurrence, 0u);
  EXPECT_EQ(policy.entries[0].use_token, 11u);
  EXPECT_EQ(policy.entries[0].use_occurrence, 0u);
  EXPECT_EQ(policy.entries[0].entry_flags, ipc::kEntryWraps);  // in/use in the next iteration

  GeneratorOptions within = HandOptions(200);
  within.cross_iteration = false;
  const GenerateResult none = GeneratePlan(p, within);
  ASSERT_EQ(none.status, GenerateStatus::kInfeasible);
  EXPECT_EQ(none.infeasibility.at_op, 3u);
  ASSERT_FALSE(none.infeasibility.largest_unswappable.empty());
  EXPECT_STREQ(none.infeasibility.largest_unswappable[0].reason,
               "not between two uses in the iteration");
}

TEST(PolicyHandCases, ShouldNameTheTensorByItsArgumentIndexAtTheOutAnchor) {
  // SixOps(5) swaps A (tensor 0) out after op 0. Op 0's tensors in the shim's record order are
  // its reads then its writes: C, A here, so A is argument 1; a gap inside the iteration does
  // not wrap.
  Profile p = SixOps(5);
  p.ops[0].reads = {2};
  p.ops[0].writes = {0};
  const GenerateResult r = GeneratePlan(p, HandOptions(200));
  ASSERT_TRUE(r.ok()) << r.message;
  const ipc::Policy policy = ToIpcPolicy(r.plan, p);
  ASSERT_EQ(policy.entries.size(), 1u);
  EXPECT_EQ(policy.entries[0].out_arg, 1u);
  EXPECT_EQ(policy.entries[0].entry_flags, 0u);
  // A profile whose ops list no tensors (as in the other hand cases) cannot name an argument.
  const ipc::Policy bare = ToIpcPolicy(GeneratePlan(SixOps(5), HandOptions(200)).plan, SixOps(5));
  ASSERT_EQ(bare.entries.size(), 1u);
  EXPECT_EQ(bare.entries[0].out_arg, ipc::kOutArgUnknown);
}

TEST(PolicyHandCases, ShouldAnchorOccurrencesPerTokenFromZero) {
  const Profile p = SixOps(5);
  const std::vector<OpAnchor> anchors = AnchorOps(p);
  const std::vector<OpAnchor> expected = {{10, 0}, {11, 0}, {12, 0}, {12, 1}, {11, 1}, {10, 1}};
  EXPECT_EQ(anchors, expected);
  EXPECT_EQ(ResolveAnchor(p, {12, 1}), 3);
  EXPECT_EQ(ResolveAnchor(p, {12, 2}), -1);
}

TEST(PolicyHandCases, ShouldRejectInvalidProfilesAndOptions) {
  Profile p = SixOps(5);
  p.tensors[0].uses = {5, 0};
  EXPECT_EQ(GeneratePlan(p, HandOptions(200)).status, GenerateStatus::kInvalidProfile);
  p = SixOps(5);
  p.ops[1].reads.push_back(99);
  EXPECT_EQ(GeneratePlan(p, HandOptions(200)).status, GenerateStatus::kInvalidProfile);
  p = SixOps(5);
  p.tensors[1].uses = {1, 2, 3};  // use before its allocation
  EXPECT_EQ(GeneratePlan(p, HandOptions(200)).status, GenerateStatus::kInvalidProfile);
  GeneratorOptions o = HandOptions(200);
  o.device_limit_bytes = 0;
  EXPECT_EQ(GeneratePlan(SixOps(5), o).status, GenerateStatus::kInvalidOptions);
  o = HandOptions(0);
  EXPECT_EQ(GeneratePlan(SixOps(5), o).status, GenerateStatus::kInvalidOptions);
  EXPECT_EQ(GeneratePlan(Profile{}, HandOptions(200)).status, GenerateStatus::kInvalidProfile);
}

}  // namespace
}  // namespace chameleon::policy
