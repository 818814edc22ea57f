// The plan replayed on the executor's streams (policy/src/executor_replay.h), on hand-made plans
// whose timelines are worked out in the comments: 1 s per op, transfers of 100 B.
#include "executor_replay.h"

#include <gtest/gtest.h>

#include "hand_profiles.h"

namespace chameleon::policy::detail {
namespace {

using testing::HandOptions;
using testing::SixOps;
using testing::Tensor;

PlannedSwap Swap(std::uint32_t tensor, std::uint32_t out_after, std::uint32_t in_start,
                 std::uint32_t use) {
  PlannedSwap s;
  s.tensor = tensor;
  s.bytes = 100;
  s.out_after_op = out_after;
  s.free_from_op = out_after + 1;
  s.in_start_op = in_start;
  s.use_op = use;
  return s;
}

// 1 s per op, the uniform share the hand-made profiles (no op times) get.
std::vector<double> OneSecondEach(const Profile& p) {
  return std::vector<double>(p.ops.size(), 1.0);
}

Profile FourOps(std::vector<ProfileTensor> tensors) {
  Profile p;
  p.iteration_s = 4;
  for (std::uint32_t i = 0; i < 4; ++i) {
    ProfileOp op;
    op.token = 10 + i;
    p.ops.push_back(op);
  }
  p.tensors = std::move(tensors);
  return p;
}

TEST(ExecutorReplay, SwapInsQueueOnTheInStreamAndOverlappingWaitsCountOnce) {
  // A and B (100 B each) leave after op 0 and come back before op 2 for op 3, at 100 B/s.
  // Steady iteration from t = 5: op 0 ends at 6; the swap-outs end at 7 and 8 (one out-stream).
  // Before op 2 (t = 7) A's swap-in takes the memory A freed (free at 7): 7-8; B's takes B's
  // (free at 8): 8-9. Op 3 starts at 8, A is there, B is not: one wait of 1 s, not 1 s each.
  const Profile p = FourOps({Tensor(100, -1, -1, {0, 3}), Tensor(101, -1, -1, {0, 3})});
  const GeneratorOptions o = HandOptions(100);
  const ReplayedIteration r =
      ReplayOnExecutor(p, {Swap(0, 0, 2, 3), Swap(1, 0, 2, 3)}, o, OneSecondEach(p));
  EXPECT_NEAR(r.in_wait_s, 1.0, 1e-12);
  EXPECT_NEAR(r.out_wait_s, 0.0, 1e-12);
  EXPECT_NEAR(r.iteration_s, 5.0, 1e-12);
}

TEST(ExecutorReplay, AnAllocationWaitsForMemoryASwapOutStillCopies) {
  // SixOps(5) at 80 B/s (1.25 s a transfer): A leaves after op 0, comes back before op 4 for op
  // 5. B (allocated before op 2) gets the memory A's swap-out frees, 0.25 s after op 2 could
  // start; A's swap-in takes B's memory, freed at the end of op 3, and ends 0.25 s after op 5
  // could start. Every iteration: 6 s + 0.25 + 0.25.
  const Profile p = SixOps(5);
  const ReplayedIteration r =
      ReplayOnExecutor(p, {Swap(0, 0, 4, 5)}, HandOptions(80), OneSecondEach(p));
  EXPECT_NEAR(r.out_wait_s, 0.25, 1e-12);
  EXPECT_NEAR(r.in_wait_s, 0.25, 1e-12);
  EXPECT_NEAR(r.iteration_s, 6.5, 1e-12);
}

TEST(ExecutorReplay, ASwapAcrossTheBoundaryIsOffTheDeviceWhenTheReplayStarts) {
  // A (100 B at 50 B/s: 2 s) leaves after op 3 and returns before the next iteration's op 0 for
  // its op 1. The first replayed iteration starts with A off the device (no swap-out before it):
  // its swap-in runs 0-2, op 1 waits 1 s, 5 s in all. From then on the swap-in takes the memory
  // of A's own swap-out, which ends 2 s after op 3: it waits for that copy, then copies for 2 s,
  // and op 1 waits 3 s: 7 s an iteration, the figure reported.
  const Profile p = FourOps({Tensor(100, -1, -1, {1, 3})});
  const ReplayedIteration r =
      ReplayOnExecutor(p, {Swap(0, 3, 4, 5)}, HandOptions(50), OneSecondEach(p));
  EXPECT_NEAR(r.in_wait_s, 3.0, 1e-12);
  EXPECT_NEAR(r.out_wait_s, 0.0, 1e-12);
  EXPECT_NEAR(r.iteration_s, 7.0, 1e-12);
}

TEST(ExecutorReplay, ASwapInHidesBehindTheOpsMeasuredTimesNotTheirCount) {
  // As above (A leaves after op 0, 100 B at 100 B/s, back before op 2 for op 3), but op 2 is
  // measured at 0.25 s: the swap-in (1 s, from op 2's start) outlasts it by 0.75 s, which op 3
  // waits. With the uniform share (1 s each) op 2 would have hidden it all.
  const Profile p = FourOps({Tensor(100, -1, -1, {0, 3})});
  const std::vector<double> op_s = {1.0, 1.0, 0.25, 1.0};
  const ReplayedIteration timed = ReplayOnExecutor(p, {Swap(0, 0, 2, 3)}, HandOptions(100), op_s);
  EXPECT_NEAR(timed.in_wait_s, 0.75, 1e-12);
  EXPECT_NEAR(timed.iteration_s, 3.25 + 0.75, 1e-12);
  const ReplayedIteration uniform =
      ReplayOnExecutor(p, {Swap(0, 0, 2, 3)}, HandOptions(100), OneSecondEach(p));
  EXPECT_NEAR(uniform.in_wait_s, 0.0, 1e-12);
}

TEST(ExecutorReplay, NoSwapsCostNothing) {
  const Profile p = SixOps(5);
  const ReplayedIteration r = ReplayOnExecutor(p, {}, HandOptions(80), OneSecondEach(p));
  EXPECT_EQ(r.in_wait_s, 0.0);
  EXPECT_EQ(r.out_wait_s, 0.0);
  EXPECT_NEAR(r.iteration_s, 6.0, 1e-12);
}

}  // namespace
}  // namespace chameleon::policy::detail
