// The working-set bound against cases worked out by hand (each shows its arithmetic).
#include "chameleon/policy/working_set_bound.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace chameleon::policy {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

/// A profile of `ops` ops taking `iteration_s` in all, with tensors of `bytes` (live all
/// iteration unless set otherwise).
Profile Make(std::size_t ops, const std::vector<std::uint64_t>& bytes, double iteration_s = 1.0) {
  Profile p;
  p.iteration_s = iteration_s;
  p.ops.resize(ops);
  for (const std::uint64_t b : bytes) {
    ProfileTensor t;
    t.bytes = b;
    p.tensors.push_back(t);
  }
  return p;
}

void Use(Profile* p, std::size_t op, std::vector<std::uint32_t> tensors) {
  for (const std::uint32_t t : tensors) {
    p->ops[op].reads.push_back(t);
    p->tensors[t].uses.push_back(static_cast<std::uint32_t>(op));
  }
}

TEST(WorkingSetBoundTest, ShouldMakeOneWholeTensorLeaveWhereTwoOpsDoNotFitTogether) {
  // Megatron's attention in small: op 0 uses the scores A and a buffer B; op 1 reads A and
  // writes the probabilities P, allocated just before it. 3 x 256 MiB = 768 MiB against a
  // 729 MB limit: E = |{A, P}| + |{B}| - limit = 805,306,368 - 729,000,000 = 76,306,368 B,
  // but only B may go, whole: M = 256 MiB, a stall of 268,435,456 / 25e9 = 10.737 ms.
  Profile p = Make(2, {256 * kMiB, 256 * kMiB, 256 * kMiB}, 0.02);
  Use(&p, 0, {0, 1});
  Use(&p, 1, {0, 2});
  p.tensors[2].alloc_op = 1;
  const WorkingSetBound b = ComputeWorkingSetBound(p, 729'000'000, 25e9, 25e9);
  ASSERT_TRUE(b.feasible);
  EXPECT_EQ(b.out_bytes, 256 * kMiB);
  EXPECT_EQ(b.boundaries, 1u);
  EXPECT_EQ(b.worst_op, 0);
  EXPECT_DOUBLE_EQ(b.compute_s, 0.02);
  EXPECT_DOUBLE_EQ(b.stall_s, 268435456.0 / 25e9);
  EXPECT_DOUBLE_EQ(b.bound_s, 0.02 + 268435456.0 / 25e9);
}

TEST(WorkingSetBoundTest, ShouldLetATensorFreedBetweenTheOpsLeaveWithoutACopy) {
  // As above, but B is freed right after op 0: nothing has to cross the link.
  Profile p = Make(2, {256 * kMiB, 256 * kMiB, 256 * kMiB});
  Use(&p, 0, {0, 1});
  Use(&p, 1, {0, 2});
  p.tensors[1].free_op = 0;
  p.tensors[2].alloc_op = 1;
  const WorkingSetBound b = ComputeWorkingSetBound(p, 729'000'000, 25e9, 25e9);
  ASSERT_TRUE(b.feasible);
  EXPECT_EQ(b.out_bytes, 0u);
  EXPECT_EQ(b.boundaries, 0u);
  EXPECT_DOUBLE_EQ(b.stall_s, 0.0);
}

TEST(WorkingSetBoundTest, ShouldMoveTheLeastSumOfWholeTensorsThatMakesRoom) {
  // Op 0 uses 100, 60 and 50 B; op 1 uses a 115 B tensor. Limit 220: E = 115 + 210 - 220 = 105.
  // Single tensors reach at most 100; pairs 160, 150, 110: the least is 60 + 50 = 110.
  Profile p = Make(2, {100, 60, 50, 115});
  Use(&p, 0, {0, 1, 2});
  Use(&p, 1, {3});
  const WorkingSetBound b = ComputeWorkingSetBound(p, 220, 1e9, 1e9);
  ASSERT_TRUE(b.feasible);
  EXPECT_EQ(b.out_bytes, 110u);
  EXPECT_DOUBLE_EQ(b.stall_s, 110 / 1e9);
}

TEST(WorkingSetBoundTest, ShouldAddTheStallsOfEveryPairOfOps) {
  // Ops alternate between two 80 B tensors under a 100 B limit: each of the 3 boundaries moves
  // the previous op's tensor (E = 80 + 80 - 100 = 60, M = 80): 240 B.
  Profile p = Make(4, {80, 80});
  Use(&p, 0, {0});
  Use(&p, 1, {1});
  Use(&p, 2, {0});
  Use(&p, 3, {1});
  const WorkingSetBound b = ComputeWorkingSetBound(p, 100, 80.0, 80.0);
  ASSERT_TRUE(b.feasible);
  EXPECT_EQ(b.out_bytes, 240u);
  EXPECT_EQ(b.boundaries, 3u);
  EXPECT_DOUBLE_EQ(b.stall_s, 3.0);
}

TEST(WorkingSetBoundTest, ShouldTakeTheFractionalExcessBeyondSixteenCandidates) {
  // Seventeen 10 B tensors leave op 0 for op 1's 50 B one under a 200 B limit: E = 50 + 170 -
  // 200 = 20. Too many to enumerate: 20 (two whole tensors would also be exactly 20).
  Profile p = Make(2, std::vector<std::uint64_t>(18, 10));
  p.tensors[17].bytes = 50;
  std::vector<std::uint32_t> first;
  for (std::uint32_t t = 0; t < 17; ++t) first.push_back(t);
  Use(&p, 0, first);
  Use(&p, 1, {17});
  const WorkingSetBound b = ComputeWorkingSetBound(p, 200, 1e9, 1e9);
  EXPECT_EQ(b.out_bytes, 20u);
}

TEST(WorkingSetBoundTest, ShouldNotCountZeroByteTensorsAmongTheCandidates) {
  // The exact case above plus 20 empty tensors at op 0: still 60 + 50 = 110, not the
  // fractional 105 that more than 16 candidates would fall back to.
  Profile p = Make(2, {100, 60, 50, 115});
  for (int k = 0; k < 20; ++k) p.tensors.push_back(ProfileTensor{});
  std::vector<std::uint32_t> first{0, 1, 2};
  for (std::uint32_t t = 4; t < 24; ++t) first.push_back(t);
  Use(&p, 0, first);
  Use(&p, 1, {3});
  EXPECT_EQ(ComputeWorkingSetBound(p, 220, 1e9, 1e9).out_bytes, 110u);
}

TEST(WorkingSetBoundTest, ShouldSayWhichOpCannotRunAtAll) {
  // Op 1 alone needs 150 B under a 100 B limit.
  Profile p = Make(2, {40, 150});
  Use(&p, 0, {0});
  Use(&p, 1, {1});
  const WorkingSetBound b = ComputeWorkingSetBound(p, 100, 1e9, 1e9);
  EXPECT_FALSE(b.feasible);
  EXPECT_EQ(b.worst_op, 1);
  EXPECT_EQ(b.worst_bytes, 50u);
}

TEST(WorkingSetBoundTest, ShouldCountMeasuredOpTimesAsTheComputeTime) {
  // With per-op times the compute is their sum (0.25 s), not the profile's 1 s.
  Profile p = Make(2, {10});
  p.ops[0].device_s = 0.1;
  p.ops[1].device_s = 0.15;
  Use(&p, 0, {0});
  Use(&p, 1, {0});
  const WorkingSetBound b = ComputeWorkingSetBound(p, 100, 1e9, 1e9);
  EXPECT_DOUBLE_EQ(b.compute_s, 0.25);
  EXPECT_DOUBLE_EQ(b.bound_s, 0.25);
}

TEST(WorkingSetBoundTest, ShouldLetATensorWhoseContentIsDeadLeaveWithoutACopy) {
  // The first case with B allocated in the step and never read after op 0 (freed only after
  // op 1): its content is dead, so dropping it makes the room. Then with B's next use only
  // writing it (op 2 overwrites it): dead as well.
  Profile p = Make(2, {256 * kMiB, 256 * kMiB, 256 * kMiB}, 0.02);
  Use(&p, 0, {0, 1});
  Use(&p, 1, {0, 2});
  p.tensors[1].alloc_op = 0;
  p.tensors[1].free_op = 1;
  p.tensors[2].alloc_op = 1;
  EXPECT_EQ(ComputeWorkingSetBound(p, 729'000'000, 25e9, 25e9).out_bytes, 0u);

  Profile q = Make(3, {256 * kMiB, 256 * kMiB, 256 * kMiB}, 0.02);
  Use(&q, 0, {0, 1});
  Use(&q, 1, {0, 2});
  q.ops[2].writes.push_back(1);
  q.tensors[1].alloc_op = 0;
  q.tensors[2].alloc_op = 1;
  q.tensors[2].free_op = 1;
  EXPECT_EQ(ComputeWorkingSetBound(q, 729'000'000, 25e9, 25e9).out_bytes, 0u);
}

/// Five ops of 0.5 s: A (100 B) is read by ops 0 and 4; op k in 1..3 uses its own tensor of
/// `middle[k - 1]` bytes, allocated for it and freed after it.
Profile Stretch(const std::vector<std::uint64_t>& middle, bool timed) {
  Profile p = Make(5, {100}, 2.5);
  Use(&p, 0, {0});
  for (std::uint32_t k = 1; k <= 3; ++k) {
    ProfileTensor x;
    x.bytes = middle[k - 1];
    x.alloc_op = static_cast<std::int32_t>(k);
    x.free_op = static_cast<std::int32_t>(k);
    p.tensors.push_back(x);
    Use(&p, k, {static_cast<std::uint32_t>(p.tensors.size() - 1)});
  }
  Use(&p, 4, {0});
  if (timed) {
    for (ProfileOp& op : p.ops) op.device_s = 0.5;
  }
  return p;
}

TEST(WorkingSetBoundTest, ShouldBringATensorPushedOutForAStretchBackBeforeItsNextRead) {
  // Limit 120: every middle op's 60 B leave no room for A, so A leaves between ops 0 and 1
  // (the pair: 100 B at 100 B/s, 1 s) and comes back between ops 3 and 4 (100 B at 50 B/s,
  // 2 s), both with the compute stream waiting: 3 s on top of 2.5 s.
  const WorkingSetBound b = ComputeWorkingSetBound(Stretch({60, 60, 60}, true), 120, 100, 50);
  ASSERT_TRUE(b.feasible);
  EXPECT_TRUE(b.windowed);
  EXPECT_EQ(b.tensor_windows, 1u);
  EXPECT_EQ(b.out_bytes, 100u);
  EXPECT_DOUBLE_EQ(b.pair_stall_s, 1.0);
  EXPECT_DOUBLE_EQ(b.stall_s, 3.0);
  EXPECT_DOUBLE_EQ(b.bound_s, 5.5);
}

TEST(WorkingSetBoundTest, ShouldLetTheOpsBeforeTheFirstBlockingOneHideTheWayOut) {
  // Only op 3 (60 B) blocks A; ops 1 and 2 (10 B) compute 1 s while A leaves (100 B at
  // 100 B/s: hidden), but A comes back after op 3 with nothing to hide it: 2 s.
  const WorkingSetBound b = ComputeWorkingSetBound(Stretch({10, 10, 60}, true), 120, 100, 50);
  EXPECT_EQ(b.out_bytes, 0u);
  EXPECT_DOUBLE_EQ(b.pair_stall_s, 0.0);
  EXPECT_DOUBLE_EQ(b.stall_s, 2.0);
}

TEST(WorkingSetBoundTest, ShouldTakeTheWindowsOnlyWithPerOpTimes) {
  // The stretch without op times: an even split of 2.5 s is no lower bound per op, so only the
  // pair counts.
  const WorkingSetBound b = ComputeWorkingSetBound(Stretch({60, 60, 60}, false), 120, 100, 50);
  EXPECT_FALSE(b.windowed);
  EXPECT_EQ(b.tensor_windows, 0u);
  EXPECT_DOUBLE_EQ(b.stall_s, 1.0);
  EXPECT_DOUBLE_EQ(b.bound_s, 3.5);
}

TEST(WorkingSetBoundTest, ShouldShareOneLinkBetweenWindowsInTheSameInterval) {
  // A and B (100 B each) are read by ops 0 and 3; op 2's 200 B leave room for neither under a
  // 250 B limit. Both leave during op 1 (50 B, 1.5 s): 200 B at 100 B/s take 2 s, so the stream
  // waits 0.5 s, though each alone would hide. Their way back is free (a 1 TB/s link).
  Profile p = Make(4, {100, 100, 50, 200});
  Use(&p, 0, {0, 1});
  Use(&p, 1, {2});
  Use(&p, 2, {3});
  Use(&p, 3, {0, 1});
  for (std::uint32_t t = 2; t < 4; ++t) {
    p.tensors[t].alloc_op = static_cast<std::int32_t>(t - 1);
    p.tensors[t].free_op = static_cast<std::int32_t>(t - 1);
  }
  p.ops[0].device_s = 0.1;
  p.ops[1].device_s = 1.5;
  p.ops[2].device_s = 0.1;
  p.ops[3].device_s = 0.1;
  const WorkingSetBound b = ComputeWorkingSetBound(p, 250, 100, 1e12);
  EXPECT_EQ(b.tensor_windows, 2u);
  EXPECT_DOUBLE_EQ(b.pair_stall_s, 0.0);
  EXPECT_NEAR(b.stall_s, 0.5 + 200 / 1e12, 1e-12);
}

}  // namespace
}  // namespace chameleon::policy
