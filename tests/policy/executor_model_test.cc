// The executor's memory model (docs/policy.md, "Executor memory model"): chunk rounding, the
// reserve below the limit, and memory accounted when transfers are issued. Plans are judged by
// an executor replay written here, apart from the generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/policy/generator.h"
#include "chameleon/policy/memory.h"
#include "hand_profiles.h"
#include "tiny_instances.h"

namespace chameleon::policy {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

// What the shim's executor holds on the device during op i: swappable tensors in whole chunks,
// others at their size, untracked bytes as measured; a swapped tensor's chunks are released when
// its swap-out is issued (after out_after_op) and taken again when its swap-in is issued (before
// in_start_op). Op numbers >= n are the next iteration's.
std::vector<std::int64_t> ExecutorReplay(const Profile& p, const std::vector<PlannedSwap>& swaps,
                                         std::uint64_t chunk) {
  const auto rounded = [&](const ProfileTensor& t) -> std::int64_t {
    if (chunk == 0 || !t.swappable) return static_cast<std::int64_t>(t.bytes);
    return static_cast<std::int64_t>((t.bytes + chunk - 1) / chunk * chunk);
  };
  const std::size_t n = p.ops.size();
  std::vector<std::int64_t> mem(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto op = static_cast<std::int64_t>(i);
    std::int64_t device = 0, requested = 0;
    for (const ProfileTensor& t : p.tensors) {
      if (t.alloc_op > op || (t.free_op >= 0 && op > t.free_op)) continue;
      device += rounded(t);
      requested += static_cast<std::int64_t>(t.bytes);
    }
    // bytes_live_after counts a tensor up to and including its free op (profile-format.md).
    const auto seen = static_cast<std::int64_t>(p.ops[i].bytes_live_after);
    mem[i] = device + std::max<std::int64_t>(0, seen - requested);
    for (const PlannedSwap& s : swaps) {
      const bool off = (s.out_after_op < i && i < s.in_start_op) ||
                       (s.out_after_op < i + n && i + n < s.in_start_op);
      if (off) mem[i] -= rounded(p.tensors[s.tensor]);
    }
  }
  return mem;
}

// Empty when every op fits `limit` in the executor replay; otherwise the first op over it.
std::string JudgeOnExecutor(const Profile& p, const std::vector<PlannedSwap>& swaps,
                            std::uint64_t chunk, std::uint64_t limit) {
  const std::vector<std::int64_t> mem = ExecutorReplay(p, swaps, chunk);
  for (std::size_t i = 0; i < mem.size(); ++i) {
    if (mem[i] > static_cast<std::int64_t>(limit)) {
      return "op " + std::to_string(i) + " holds " + std::to_string(mem[i]) + " > " +
             std::to_string(limit);
    }
  }
  return {};
}

using testing::HandOptions;
using testing::SixOps;
using testing::Tensor;

// 6 ops of 1 s (forward 0-2, backward 3-5). A and B (3 MiB) are idle from op 0 to op 5, C (5 MiB)
// lives over ops 1-4, D (1 MiB, passed through) is used by every op. Requested bytes: 7 12 12 12
// 12 7 MiB; in 2 MiB chunks: 9 15 15 15 15 9 MiB.
// Six ops of 1 s, tokens 10-15; ops before `backward_from` are forward, the rest backward.
Profile SixOneSecondOps(std::uint32_t backward_from) {
  Profile p;
  p.iteration_s = 6;
  for (std::uint32_t i = 0; i < 6; ++i) {
    ProfileOp op;
    op.token = 10 + i;
    op.phase = i < backward_from ? Phase::kForward : Phase::kBackward;
    p.ops.push_back(op);
  }
  return p;
}

Profile ThreeMiBTensors() {
  Profile p = SixOneSecondOps(3);
  p.tensors.push_back(Tensor(3 * kMiB, -1, -1, {0, 5}));
  p.tensors.push_back(Tensor(3 * kMiB, 0, 5, {0, 5}));
  p.tensors.push_back(Tensor(5 * kMiB, 1, 4, {1, 4}));
  p.tensors.push_back(Tensor(1 * kMiB, -1, -1, {0, 1, 2, 3, 4, 5}, false));
  for (std::uint32_t t = 0; t < p.tensors.size(); ++t) {
    for (std::uint32_t u : p.tensors[t].uses) p.ops[u].reads.push_back(t);
  }
  // bytes_live_after counts requested sizes (the shim's device_bytes_live), a tensor up to and
  // including its free op (docs/profile-format.md): nothing untracked.
  const std::uint64_t after[] = {7, 12, 12, 12, 12, 7};
  for (std::size_t i = 0; i < 6; ++i) p.ops[i].bytes_live_after = after[i] * kMiB;
  return p;
}

GeneratorOptions ExecutorOptions(std::uint64_t limit, std::uint64_t chunk) {
  GeneratorOptions o;
  o.device_limit_bytes = limit;
  o.host_bandwidth_bytes_per_s = 1e12;  // transfers take microseconds of 1 s ops
  o.link_efficiency = 1.0;
  o.min_swap_bytes = 0;
  o.layers_per_phase = 3;
  o.chunk_bytes = chunk;
  o.release_at_issue = true;
  return o;
}

TEST(PolicyExecutorModel, ReplayCountsSwappableTensorsInWholeChunks) {
  const Profile p = ThreeMiBTensors();
  EXPECT_EQ(
      ReplayMemory(p, 2 * kMiB),
      (std::vector<std::uint64_t>{9 * kMiB, 15 * kMiB, 15 * kMiB, 15 * kMiB, 15 * kMiB, 9 * kMiB}));
  // chunk 0 is the tensors' own bytes, as before.
  EXPECT_EQ(ReplayMemory(p, 0), ReplayMemory(p));
  EXPECT_EQ(ReplayMemory(p), (std::vector<std::uint64_t>{7 * kMiB, 12 * kMiB, 12 * kMiB, 12 * kMiB,
                                                         12 * kMiB, 7 * kMiB}));
  EXPECT_EQ(DeviceBytes(p.tensors[0], 2 * kMiB), 4 * kMiB);
  EXPECT_EQ(DeviceBytes(p.tensors[3], 2 * kMiB), 1 * kMiB);  // passed through: not rounded
  EXPECT_EQ(DeviceBytes(Tensor(4 * kMiB, 0, 0, {0}), 2 * kMiB), 4 * kMiB);
  // Below the executor's minimum a tensor is passed through: its own size.
  EXPECT_EQ(DeviceBytes(p.tensors[0], 2 * kMiB, 4 * kMiB), 3 * kMiB);
  EXPECT_EQ(ReplayMemory(p, 2 * kMiB, 4 * kMiB)[1], 15 * kMiB - 3 * kMiB + kMiB);  // C still 6
}

TEST(PolicyExecutorModel, APinnedTensorIsHeldInWholeChunksThoughNeverACandidate) {
  // A pointer-table target the daemon keeps on the device: unswappable, but the executor still
  // serves it in chunks. Counted at its own 3 MiB the plan would be one MiB short of the
  // executor's memory at every op it lives (GPT-2 XL: one eviction every iteration).
  ProfileTensor pinned = Tensor(3 * kMiB, -1, -1, {0, 5}, false);
  EXPECT_EQ(DeviceBytes(pinned, 2 * kMiB), 3 * kMiB);  // unswappable and not pinned: passed through
  pinned.pinned = true;
  EXPECT_EQ(DeviceBytes(pinned, 2 * kMiB), 4 * kMiB);
  EXPECT_EQ(DeviceBytes(pinned, 2 * kMiB, 4 * kMiB), 3 * kMiB);  // below the minimum: its size
  Profile p = ThreeMiBTensors();
  p.tensors[0].swappable = false;
  p.tensors[0].pinned = true;
  EXPECT_EQ(ReplayMemory(p, 2 * kMiB)[0], 9 * kMiB);  // as when it was swappable
}

TEST(PolicyExecutorModel, UntrackedBytesAreMeasuredAgainstRequestedSizes) {
  Profile p = ThreeMiBTensors();
  p.ops[2].bytes_live_after += kMiB / 2;  // e.g. a workspace no tensor explains
  const std::vector<std::uint64_t> mem = ReplayMemory(p, 2 * kMiB);
  EXPECT_EQ(mem[2], 15 * kMiB + kMiB / 2);
  EXPECT_EQ(mem[1], 15 * kMiB);  // rounding is not mistaken for untracked memory
}

TEST(PolicyExecutorModel, PlanWithChunksFitsTheExecutorWhereTheByteModelDoesNot) {
  const Profile p = ThreeMiBTensors();
  const std::uint64_t limit = 9 * kMiB;
  // Counting requested bytes, one 3 MiB swap brings 12 MiB down to 9 MiB...
  const GenerateResult bytes_only = GeneratePlan(p, ExecutorOptions(limit, 0));
  ASSERT_TRUE(bytes_only.ok()) << bytes_only.message;
  EXPECT_EQ(bytes_only.plan.swaps.size(), 1u);
  // ...but the executor frees 4 MiB of its 15: that plan overflows there.
  EXPECT_FALSE(JudgeOnExecutor(p, bytes_only.plan.swaps, 2 * kMiB, limit).empty());

  const GenerateResult chunked = GeneratePlan(p, ExecutorOptions(limit, 2 * kMiB));
  ASSERT_TRUE(chunked.ok()) << chunked.message;
  EXPECT_EQ(chunked.plan.swaps.size(), 2u);
  EXPECT_EQ(JudgeOnExecutor(p, chunked.plan.swaps, 2 * kMiB, limit), "");
  EXPECT_EQ(chunked.plan.peak_before_bytes, 15 * kMiB);
  EXPECT_LE(chunked.plan.predicted_peak_bytes, limit);
  for (const PlannedSwap& s : chunked.plan.swaps) {
    EXPECT_EQ(s.bytes, 3 * kMiB);  // what the entry binds to and copies
    EXPECT_EQ(s.device_bytes, 4 * kMiB);
  }
  // The shim binds entries by the allocation's requested size.
  const ipc::Policy policy = ToIpcPolicy(chunked.plan, p);
  for (const ipc::SwapEntry& e : policy.entries) EXPECT_EQ(e.bytes, 3 * kMiB);
}

TEST(PolicyExecutorModel, ReserveKeepsHeadroomBelowTheLimit) {
  const Profile p = ThreeMiBTensors();
  GeneratorOptions o = ExecutorOptions(12 * kMiB, 0);
  const GenerateResult fits = GeneratePlan(p, o);
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(fits.plan.swaps.empty());  // the peak is exactly the limit

  o.reserve_bytes = kMiB;
  const GenerateResult reserved = GeneratePlan(p, o);
  ASSERT_TRUE(reserved.ok()) << reserved.message;
  EXPECT_EQ(reserved.plan.swaps.size(), 1u);
  EXPECT_EQ(JudgeOnExecutor(p, reserved.plan.swaps, 0, 11 * kMiB), "");
  EXPECT_LE(reserved.plan.predicted_peak_bytes, 11 * kMiB);
  EXPECT_EQ(reserved.plan.planning_limit_bytes, 11 * kMiB);
  // The shim still enforces the real limit: the reserve is the plan's own headroom.
  EXPECT_EQ(reserved.plan.device_limit_bytes, 12 * kMiB);
  EXPECT_EQ(ToIpcPolicy(reserved.plan, p).summary.device_limit_bytes, 12 * kMiB);

  // Infeasibility is explained against the reduced limit.
  o.reserve_bytes = 11 * kMiB + kMiB / 2;  // 0.5 MiB left, D alone needs 1 MiB
  const GenerateResult none = GeneratePlan(p, o);
  ASSERT_EQ(none.status, GenerateStatus::kInfeasible);
  EXPECT_TRUE(none.plan.swaps.empty());
  EXPECT_GT(none.infeasibility.bytes_missing, 0u);
}

TEST(PolicyExecutorModel, RejectsAReserveThatLeavesNothingAndAbsurdChunks) {
  const Profile p = ThreeMiBTensors();
  GeneratorOptions o = ExecutorOptions(8 * kMiB, 0);
  o.reserve_bytes = 8 * kMiB;
  EXPECT_EQ(GeneratePlan(p, o).status, GenerateStatus::kInvalidOptions);
  o.reserve_bytes = 0;
  o.chunk_bytes = (1ull << 30) + 1;
  EXPECT_EQ(GeneratePlan(p, o).status, GenerateStatus::kInvalidOptions);
}

TEST(PolicyExecutorModel, ReleaseAtIssueFreesAfterTheLastUseAndPrefetchesAfterThePeak) {
  GeneratorOptions o = HandOptions(200);  // 0.5 s per transfer, 1 s per layer
  const Profile p = SixOps(5);
  // The paper's model: off from the layer after the copy completes (op 2), swap-in as late as
  // the link allows (op 4).
  const GenerateResult paper = GeneratePlan(p, o);
  ASSERT_TRUE(paper.ok());
  ASSERT_EQ(paper.plan.swaps.size(), 1u);
  EXPECT_EQ(paper.plan.swaps[0].free_from_op, 2u);

  o.release_at_issue = true;
  const GenerateResult r = GeneratePlan(p, o);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.plan.swaps.size(), 1u);
  const PlannedSwap& s = r.plan.swaps[0];
  EXPECT_EQ(s.tensor, 0u);
  EXPECT_EQ(s.out_after_op, 0u);
  EXPECT_EQ(s.free_from_op, 1u);  // the executor releases the chunks when the copy is issued
  EXPECT_EQ(s.in_start_op, 4u);   // right after op 3, the last op over the limit
  EXPECT_EQ(s.use_op, 5u);
  EXPECT_DOUBLE_EQ(s.stall_s, 0.0);  // layer 1 carries the copy out, layer 4 the copy in
  EXPECT_EQ(r.plan.memory_after, (std::vector<std::uint64_t>{200, 100, 200, 200, 200, 200}));
  EXPECT_EQ(JudgeOnExecutor(p, r.plan.swaps, 0, 250), "");
}

TEST(PolicyExecutorModel, ReleaseAtIssuePredictsTheWaitOfTheOpThatTakesTheMemory) {
  GeneratorOptions o = HandOptions(40);  // 2.5 s per transfer
  o.release_at_issue = true;
  const GenerateResult r = GeneratePlan(SixOps(5), o);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.plan.swaps.size(), 1u);
  const PlannedSwap& s = r.plan.swaps[0];
  // Op 2 takes the memory at 2 s; layer 1 carried 1 s of the copy: 1.5 s wait. The swap-in has
  // layer 4 (1 s) of its 2.5 s: 1.5 s wait before op 5.
  EXPECT_DOUBLE_EQ(s.out_stall_s, 1.5);
  EXPECT_DOUBLE_EQ(s.stall_s, 3.0);
  EXPECT_EQ(s.free_from_op, 1u);
  EXPECT_EQ(s.in_start_op, 4u);
}

// Random iterations: every plan fits the executor replay, releases right after the last use,
// and needs each of its swaps (dropping any one overflows): bytes moved that no op needs cost
// link time in both directions.
void CheckExecutorPlans(bool medium, std::uint64_t seeds) {
  std::uint32_t planned = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    testing::Instance in = medium ? testing::MediumInstance(seed) : testing::TinyInstance(seed);
    in.options.release_at_issue = true;
    in.options.chunk_bytes = seed % 3 == 0 ? 0 : 150 + 100 * (seed % 4);
    in.options.reserve_bytes =
        seed % 5 == 0 ? std::min<std::uint64_t>(50, in.options.device_limit_bytes - 1) : 0;
    const GenerateResult r = GeneratePlan(in.profile, in.options);
    ASSERT_TRUE(r.ok() || r.status == GenerateStatus::kInfeasible) << seed << ": " << r.message;
    if (!r.ok()) {
      EXPECT_TRUE(r.plan.swaps.empty());
      continue;
    }
    ++planned;
    const std::uint64_t limit = in.options.device_limit_bytes - in.options.reserve_bytes;
    const std::uint64_t chunk = in.options.chunk_bytes;
    ASSERT_EQ(JudgeOnExecutor(in.profile, r.plan.swaps, chunk, limit), "") << "seed " << seed;
    // The generic judge (triggers are uses, resident at every use, no overlapping swaps).
    for (const PlannedSwap& s : r.plan.swaps) {
      EXPECT_EQ(s.free_from_op, s.out_after_op + 1) << "seed " << seed;
    }
    EXPECT_EQ(testing::JudgePlan(in.profile, r.plan.swaps, INT64_MAX), "") << "seed " << seed;
    for (std::size_t k = 0; k < r.plan.swaps.size(); ++k) {
      std::vector<PlannedSwap> without = r.plan.swaps;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(k));
      EXPECT_NE(JudgeOnExecutor(in.profile, without, chunk, limit), "")
          << "seed " << seed << ": swap " << k << " is not needed";
    }
  }
  EXPECT_GT(planned, seeds / 4);  // the instances exercise the planner, not only rejections
}

// The attention of the Megatron trace in small: 6 ops of 1 s, all forward, two logical layers of
// three ops. W (4 MiB, live across iterations) is read at ops 1 and 4; S (4 MiB) is written at op 1
// and read at op 3; T (4 MiB) at ops 2 and 4. Ops 2 and 3 hold all three (12 MiB), but no op
// touches more than 8 MiB. Every idle interval (W: 1 -> 4 and 4 -> next 1, S: 1 -> 3, T: 2 -> 4)
// lies within one layer of the next, so the paper's two-layer rule leaves nothing to swap.
Profile AttentionInSmall() {
  Profile p = SixOneSecondOps(6);
  p.tensors.push_back(Tensor(4 * kMiB, -1, -1, {1, 4}));  // W
  p.tensors.push_back(Tensor(4 * kMiB, 1, 3, {1, 3}));    // S
  p.tensors.push_back(Tensor(4 * kMiB, 2, 4, {2, 4}));    // T
  for (std::uint32_t t = 0; t < p.tensors.size(); ++t) {
    for (std::uint32_t u : p.tensors[t].uses) p.ops[u].reads.push_back(t);
  }
  const std::uint64_t after[] = {4, 8, 12, 12, 8, 4};
  for (std::size_t i = 0; i < 6; ++i) p.ops[i].bytes_live_after = after[i] * kMiB;
  return p;
}

TEST(PolicyExecutorModel, ShortGapsFitAWorkingSetTheTwoLayerRuleCannot) {
  const Profile p = AttentionInSmall();
  const std::uint64_t limit = 8 * kMiB;
  GeneratorOptions o = ExecutorOptions(limit, 2 * kMiB);
  o.layers_per_phase = 2;
  o.short_gaps = false;
  const GenerateResult paper = GeneratePlan(p, o);
  ASSERT_EQ(paper.status, GenerateStatus::kInfeasible);
  EXPECT_EQ(paper.infeasibility.bytes_missing, 4 * kMiB);
  ASSERT_FALSE(paper.infeasibility.largest_unswappable.empty());
  EXPECT_STREQ(paper.infeasibility.largest_unswappable[0].reason,
               "idle for less than two logical layers");

  o.short_gaps = true;
  const GenerateResult shorter = GeneratePlan(p, o);
  ASSERT_TRUE(shorter.ok()) << shorter.message;
  EXPECT_EQ(JudgeOnExecutor(p, shorter.plan.swaps, 2 * kMiB, limit), "");
  ASSERT_EQ(shorter.plan.swaps.size(), 1u);  // one 4 MiB tensor off over ops 2-3 is enough
  const PlannedSwap& s = shorter.plan.swaps[0];
  EXPECT_LE(s.out_after_op, 1u);
  EXPECT_GE(s.in_start_op, 4u);
  // Both transfers fall inside the layers of the ops that need the memory and the tensor: the
  // ops wait for all of them, and the prediction says so.
  EXPECT_GT(s.out_stall_s, 0.0);
  EXPECT_GT(s.stall_s, s.out_stall_s);
  EXPECT_DOUBLE_EQ(shorter.plan.predicted_iteration_s, p.iteration_s + s.stall_s);

  // Only the executor's accounting makes a short gap safe: the paper's model stays infeasible.
  o.release_at_issue = false;
  EXPECT_EQ(GeneratePlan(p, o).status, GenerateStatus::kInfeasible);
}

TEST(PolicyExecutorModel, ShortGapsLeaveAPlanThatFitsWithoutThemUnchanged) {
  const Profile p = ThreeMiBTensors();
  for (std::uint64_t limit : {9 * kMiB, 11 * kMiB, 13 * kMiB}) {
    GeneratorOptions o = ExecutorOptions(limit, 2 * kMiB);
    const GenerateResult with = GeneratePlan(p, o);
    o.short_gaps = false;
    const GenerateResult without = GeneratePlan(p, o);
    ASSERT_TRUE(without.ok()) << without.message;
    ASSERT_EQ(with.plan.swaps.size(), without.plan.swaps.size()) << limit;
    for (std::size_t i = 0; i < with.plan.swaps.size(); ++i) {
      EXPECT_EQ(with.plan.swaps[i].tensor, without.plan.swaps[i].tensor);
      EXPECT_EQ(with.plan.swaps[i].out_after_op, without.plan.swaps[i].out_after_op);
      EXPECT_EQ(with.plan.swaps[i].in_start_op, without.plan.swaps[i].in_start_op);
    }
  }
}

TEST(PolicyExecutorModel, TinyPlansFitTheExecutorAndNeedEverySwap) {
  CheckExecutorPlans(false, 600);
}

TEST(PolicyExecutorModel, MediumPlansFitTheExecutorAndNeedEverySwap) {
  CheckExecutorPlans(true, 150);
}

}  // namespace
}  // namespace chameleon::policy
