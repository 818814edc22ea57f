// The pipeline's transfer bound (ComputeTransferBound(PipelineBoundInput)) against values worked
// out by hand; each case shows its arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "chameleon/policy/transfer_bound.h"

namespace chameleon::policy {
namespace {

// A stage on an H200-like host link: 46.8 GB/s out, 54.8 GB/s in.
StageBoundInput Stage(double peak, double compute_s) {
  StageBoundInput s;
  s.peak_bytes = static_cast<std::uint64_t>(peak);
  s.compute_s = compute_s;
  s.out_bytes_per_s = 46.8e9;
  s.in_bytes_per_s = 54.8e9;
  return s;
}

PipelineBoundInput FourStages() {
  // 1F1B's shape: stage 0 holds the most, the last stage the least (plus its head).
  PipelineBoundInput in;
  in.stages = {Stage(140e9, 1.8), Stage(120e9, 1.9), Stage(100e9, 1.9), Stage(90e9, 1.7)};
  in.limit_bytes = 100'000'000'000u;
  in.unlimited_s = 2.0;
  return in;
}

TEST(PipelineTransferBoundTest, ShouldBeTheSlowestStagesHostLinkWhenItCannotHideTheSwaps) {
  // X = 40, 20, 0, 0 GB. Host link: X / min(46.8, 54.8) GB/s: 40 / 46.8 = 0.8547 s and
  // 20 / 46.8 = 0.4274 s, under every stage's compute, so T_b = T_unlimited = 2.0 s... at this
  // limit. At 60 GB: X_0 = 80 GB -> 1.7094 s, still < 1.8. At 40 GB: X_0 = 100 GB -> 2.1368 s
  // > C_0 = 1.8 and > T_unlimited: the bound, on stage 0.
  PipelineBoundInput in = FourStages();
  PipelineTransferBound b = ComputeTransferBound(in);
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  ASSERT_EQ(b.stages.size(), 4u);
  EXPECT_EQ(b.stages[0].excess_bytes, 40'000'000'000u);
  EXPECT_EQ(b.stages[1].excess_bytes, 20'000'000'000u);
  EXPECT_EQ(b.stages[2].excess_bytes, 0u);
  EXPECT_DOUBLE_EQ(b.stages[0].link_s, 40e9 / 46.8e9);
  EXPECT_DOUBLE_EQ(b.stages[0].bound_s, 1.8);
  EXPECT_DOUBLE_EQ(b.stages[1].bound_s, 1.9);
  EXPECT_DOUBLE_EQ(b.bound_s, 2.0);
  EXPECT_EQ(b.slowest_stage, 1);  // 1.9 s of compute, first of the two
  EXPECT_DOUBLE_EQ(b.relative_throughput, 1.0);

  in.limit_bytes = 40'000'000'000u;
  b = ComputeTransferBound(in);
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_EQ(b.stages[0].host_bytes, 100'000'000'000u);
  EXPECT_DOUBLE_EQ(b.stages[0].link_s, 100e9 / 46.8e9);  // 2.1368 s
  EXPECT_DOUBLE_EQ(b.bound_s, 100e9 / 46.8e9);
  EXPECT_EQ(b.slowest_stage, 0);
  EXPECT_NEAR(b.relative_throughput, 2.0 / (100e9 / 46.8e9), 1e-12);  // 0.936
}

TEST(PipelineTransferBoundTest, ShouldMoveThePeerShareOverNvlinkBesideTheHostLink) {
  // Stage 0 at a 40 GB limit: X_0 = 100 GB, 90 GB of it on a peer at 370 GB/s each way and
  // 10 GB to the host: max(10 / 46.8 = 0.2137, 90 / 370 = 0.2432) = 0.2432 s < C_0 = 1.8, so
  // T_b = T_unlimited. Host only it was 2.1368 s: the peer share is what hides the swaps.
  PipelineBoundInput in = FourStages();
  in.limit_bytes = 40'000'000'000u;
  for (StageBoundInput& s : in.stages) {
    s.peer_out_bytes_per_s = 370e9;
    s.peer_in_bytes_per_s = 370e9;
  }
  in.stages[0].peer_bytes = 90'000'000'000u;
  in.stages[1].peer_bytes = 500'000'000'000u;  // more than X_1 = 80 GB: capped
  const PipelineTransferBound b = ComputeTransferBound(in);
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_EQ(b.stages[0].peer_bytes, 90'000'000'000u);
  EXPECT_EQ(b.stages[0].host_bytes, 10'000'000'000u);
  EXPECT_DOUBLE_EQ(b.stages[0].link_s, 90e9 / 370e9);
  EXPECT_EQ(b.stages[1].peer_bytes, 80'000'000'000u);
  EXPECT_EQ(b.stages[1].host_bytes, 0u);
  EXPECT_DOUBLE_EQ(b.stages[1].link_s, 80e9 / 370e9);
  // Stage 2: X_2 = 60 GB, nothing on the peer: 60 / 46.8 = 1.2821 s, under its 1.9 s.
  EXPECT_DOUBLE_EQ(b.stages[2].link_s, 60e9 / 46.8e9);
  EXPECT_DOUBLE_EQ(b.bound_s, 2.0);
}

TEST(PipelineTransferBoundTest, ShouldUseTheSlowerDirectionOfEachLink) {
  // One stage, X = 10 GB to the host at 50 GB/s out but 10 GB/s in: 10 / 10 = 1.0 s > C = 0.4,
  // > T_unlimited = 0.5: T_b = 1.0 s, half the unlimited throughput.
  PipelineBoundInput in;
  in.stages = {Stage(30e9, 0.4)};
  in.stages[0].out_bytes_per_s = 50e9;
  in.stages[0].in_bytes_per_s = 10e9;
  in.limit_bytes = 20'000'000'000u;
  in.unlimited_s = 0.5;
  const PipelineTransferBound b = ComputeTransferBound(in);
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_DOUBLE_EQ(b.bound_s, 1.0);
  EXPECT_DOUBLE_EQ(b.relative_throughput, 0.5);
}

TEST(PipelineTransferBoundTest, ShouldSayInfeasibleOrInvalidAndNeverDivideByZero) {
  PipelineBoundInput in = FourStages();
  in.reserve_bytes = 1'000'000'000u;
  in.stages[3].largest_op_bytes = 99'500'000'000u;  // + 1 GB reserve > the 100 GB limit
  PipelineTransferBound b = ComputeTransferBound(in);
  EXPECT_EQ(b.status, TransferBoundStatus::kInfeasible);
  ASSERT_EQ(b.stages.size(), 4u);
  EXPECT_TRUE(b.stages[3].infeasible);
  EXPECT_FALSE(b.stages[0].infeasible);
  in.stages[3].largest_op_bytes = std::numeric_limits<std::uint64_t>::max();  // no wrap
  EXPECT_EQ(ComputeTransferBound(in).status, TransferBoundStatus::kInfeasible);

  EXPECT_EQ(ComputeTransferBound(PipelineBoundInput{}).status, TransferBoundStatus::kInvalid);
  in = FourStages();
  in.stages[1].in_bytes_per_s = 0;
  EXPECT_EQ(ComputeTransferBound(in).status, TransferBoundStatus::kInvalid);
  in = FourStages();
  in.stages[0].peer_bytes = 1;  // a peer share with no peer bandwidth
  EXPECT_EQ(ComputeTransferBound(in).status, TransferBoundStatus::kInvalid);
  in = FourStages();
  in.stages[2].compute_s = 2.5;  // a stage busier than the whole iteration
  EXPECT_EQ(ComputeTransferBound(in).status, TransferBoundStatus::kInvalid);
  in = FourStages();
  in.unlimited_s = std::nan("");
  EXPECT_EQ(ComputeTransferBound(in).status, TransferBoundStatus::kInvalid);
}

}  // namespace
}  // namespace chameleon::policy
