// The transfer bound against values worked out by hand (each case shows its arithmetic).
#include "chameleon/policy/transfer_bound.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace chameleon::policy {
namespace {

TransferBoundInput Input(std::uint64_t peak, std::uint64_t limit, std::uint64_t optimizer,
                         double out_bw, double in_bw, double unlimited, double forward) {
  TransferBoundInput in;
  in.peak_bytes = peak;
  in.limit_bytes = limit;
  in.optimizer_state_bytes = optimizer;
  in.out_bytes_per_s = out_bw;
  in.in_bytes_per_s = in_bw;
  in.unlimited_s = unlimited;
  in.forward_s = forward;
  return in;
}

TEST(TransferBoundTest, ShouldBeTheUnlimitedTimeWhenTheLinkHidesTheSwaps) {
  // X = 10 - 6 = 4 GB, A = 4 - 1 = 3 GB. Link: 4e9 / min(20e9, 25e9) = 0.2 s. Phases:
  // max(0.2, 3e9 / 20e9 = 0.15) + max(0.3, 3e9 / 25e9 = 0.12) = 0.5 s. T_b = max(0.5, 0.2, 0.5).
  const TransferBound b = ComputeTransferBound(Input(10e9, 6e9, 1e9, 20e9, 25e9, 0.5, 0.2));
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_EQ(b.excess_bytes, 4'000'000'000u);
  EXPECT_EQ(b.across_bytes, 3'000'000'000u);
  EXPECT_DOUBLE_EQ(b.link_s, 0.2);
  EXPECT_DOUBLE_EQ(b.phases_s, 0.5);
  EXPECT_DOUBLE_EQ(b.bound_s, 0.5);
  EXPECT_DOUBLE_EQ(b.relative_throughput, 1.0);
}

TEST(TransferBoundTest, ShouldAddBothPhasesWhenTheBytesCannotCrossInTime) {
  // X = A = 40 - 10 = 30 GB (P = 0, a trace). Link: 30e9 / 25e9 = 1.2 s. Phases:
  // max(0.4, 30e9 / 25e9 = 1.2) + max(0.6, 1.2) = 2.4 s: out before the peak, back after it.
  const TransferBound b = ComputeTransferBound(Input(40e9, 10e9, 0, 25e9, 25e9, 1.0, 0.4));
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_EQ(b.across_bytes, 30'000'000'000u);
  EXPECT_DOUBLE_EQ(b.link_s, 1.2);
  EXPECT_DOUBLE_EQ(b.phases_s, 2.4);
  EXPECT_DOUBLE_EQ(b.bound_s, 2.4);
  EXPECT_NEAR(b.relative_throughput, 1.0 / 2.4, 1e-12);
}

TEST(TransferBoundTest, ShouldBeLimitedByTheSlowerDirectionWhenOptimizerStateCoversTheExcess) {
  // X = 10 GB, P = 12 GB > X: A = max(0, 10 - 12) = 0, so the phases are 0.25 + 0.25 = 0.5 s.
  // The link still moves X each way at the slower direction: 10e9 / min(50e9, 10e9) = 1.0 s.
  const TransferBound b = ComputeTransferBound(Input(30e9, 20e9, 12e9, 50e9, 10e9, 0.5, 0.25));
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_EQ(b.across_bytes, 0u);
  EXPECT_DOUBLE_EQ(b.link_s, 1.0);
  EXPECT_DOUBLE_EQ(b.phases_s, 0.5);
  EXPECT_DOUBLE_EQ(b.bound_s, 1.0);
  EXPECT_DOUBLE_EQ(b.relative_throughput, 0.5);
}

TEST(TransferBoundTest, ShouldBeTheUnlimitedTimeWhenTheLimitIsAboveThePeak) {
  const TransferBound b = ComputeTransferBound(Input(8e9, 9e9, 0, 25e9, 25e9, 0.3, 0.1));
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_EQ(b.excess_bytes, 0u);
  EXPECT_DOUBLE_EQ(b.bound_s, 0.3);
}

TEST(TransferBoundTest, ShouldReportInfeasibleBelowTheLargestOpPlusTheReserve) {
  // The largest op needs 3 GB at once and the executor keeps 1 GB: 4 GB is the least any policy
  // can run with.
  TransferBoundInput in = Input(10e9, 3'999'999'999, 0, 25e9, 25e9, 0.5, 0.2);
  in.largest_op_bytes = 3'000'000'000;
  in.reserve_bytes = 1'000'000'000;
  EXPECT_EQ(ComputeTransferBound(in).status, TransferBoundStatus::kInfeasible);
  in.limit_bytes = 4'000'000'000;
  const TransferBound b = ComputeTransferBound(in);
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  // X = A = 6 GB: link 0.24 s, phases max(0.2, 0.24) + max(0.3, 0.24) = 0.54 s.
  EXPECT_DOUBLE_EQ(b.bound_s, 0.54);
  // A reserve that would wrap the sum is still infeasible.
  in.reserve_bytes = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(ComputeTransferBound(in).status, TransferBoundStatus::kInfeasible);
}

TEST(TransferBoundTest, ShouldRejectInputsOutOfRange) {
  EXPECT_EQ(ComputeTransferBound(Input(10e9, 5e9, 0, 25e9, 0, 0.5, 0.2)).status,
            TransferBoundStatus::kInvalid);
  EXPECT_EQ(ComputeTransferBound(Input(10e9, 5e9, 0, -1, 25e9, 0.5, 0.2)).status,
            TransferBoundStatus::kInvalid);
  EXPECT_EQ(ComputeTransferBound(Input(10e9, 5e9, 0, 25e9, 25e9, 0.5, 0.6)).status,
            TransferBoundStatus::kInvalid);
  EXPECT_EQ(ComputeTransferBound(Input(10e9, 5e9, 0, 25e9, 25e9, std::nan(""), 0.2)).status,
            TransferBoundStatus::kInvalid);
  EXPECT_STREQ(ToString(TransferBoundStatus::kInfeasible), "infeasible");
}

TransferBoundInput WithBackward(TransferBoundInput in, double backward) {
  in.backward_s = backward;
  return in;
}

TEST(TransferBoundTest, ShouldWindowOptimizerStateBetweenItsUpdateAndThePeak) {
  // X = 10 GB, P = 12 GB, A = 0; T_f 0.25, T_bw 0.2, so T_o = 0.5 - 0.45 = 0.05 s. f = 0.25,
  // b = 0.2, o = max(0.05, 10e9 / 50e9 - 0.25 = -0.05, 10e9 / 10e9 - 0.2 = 0.8) = 0.8: the
  // state cannot start back before the peak, so the slow inbound direction has only the
  // backward and the stretched optimizer phase. T_w = 0.25 + 0.2 + 0.8 = 1.25 s > T_b = 1.0 s.
  const TransferBound b =
      ComputeTransferBound(WithBackward(Input(30e9, 20e9, 12e9, 50e9, 10e9, 0.5, 0.25), 0.2));
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_DOUBLE_EQ(b.bound_s, 1.0);
  EXPECT_NEAR(b.windowed_s, 1.25, 1e-12);
  EXPECT_NEAR(b.windowed_relative_throughput, 0.5 / 1.25, 1e-12);
}

TEST(TransferBoundTest, ShouldStretchTheOptimizerPhaseForAnLlmShapedStep) {
  // GPT-2-XL-like: X = 12 GB all optimizer state (P = 20 GB), 48 / 60 GB/s out / in, T = 0.15 s
  // = 0.05 forward + 0.09 backward + 0.01 optimizer. T_b = max(0.15, 12e9 / 48e9 = 0.25, 0.05 +
  // 0.10) = 0.25. Windowed: f = 0.05, b = 0.09, o = max(0.01, 0.25 - 0.05 = 0.2, 0.2 - 0.09 =
  // 0.11) = 0.2, T_w = 0.34 s: 0.9 of T_b (0.278 s) is below what any policy can reach.
  const TransferBound b =
      ComputeTransferBound(WithBackward(Input(32e9, 20e9, 20e9, 48e9, 60e9, 0.15, 0.05), 0.09));
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_DOUBLE_EQ(b.bound_s, 0.25);
  EXPECT_NEAR(b.windowed_s, 0.34, 1e-12);
}

TEST(TransferBoundTest, ShouldWindowBothKindsWhenTheExcessExceedsTheOptimizerState) {
  // X = 30 GB, P = 10 GB, A = 20 GB, 20 GB/s each way; T = 1.0 = 0.3 + 0.6 + 0.1 s.
  // T_b = max(1.0, 1.5, max(0.3, 1.0) + max(0.7, 1.0)) = 2.0. Windowed: f = max(0.3, 1.0) = 1.0,
  // b = max(0.6, 1.0) = 1.0, o = max(0.1, 1.5 - 1.0, 1.5 - 1.0) = 0.5, T_w = 2.5 s.
  const TransferBound b =
      ComputeTransferBound(WithBackward(Input(40e9, 10e9, 10e9, 20e9, 20e9, 1.0, 0.3), 0.6));
  ASSERT_EQ(b.status, TransferBoundStatus::kOk);
  EXPECT_DOUBLE_EQ(b.bound_s, 2.0);
  EXPECT_NEAR(b.windowed_s, 2.5, 1e-12);
}

TEST(TransferBoundTest, ShouldEqualTheBoundWithoutOptimizerStateOrBackwardTime) {
  // A trace (P = 0): every byte is already windowed by the phases term, T_w = T_b = 2.4 s.
  const TransferBound trace =
      ComputeTransferBound(WithBackward(Input(40e9, 10e9, 0, 25e9, 25e9, 1.0, 0.4), 0.5));
  ASSERT_EQ(trace.status, TransferBoundStatus::kOk);
  EXPECT_DOUBLE_EQ(trace.windowed_s, trace.bound_s);
  EXPECT_DOUBLE_EQ(trace.bound_s, 2.4);
  // Backward not known: no tightening is claimed.
  const TransferBound unknown =
      ComputeTransferBound(Input(30e9, 20e9, 12e9, 50e9, 10e9, 0.5, 0.25));
  ASSERT_EQ(unknown.status, TransferBoundStatus::kOk);
  EXPECT_DOUBLE_EQ(unknown.windowed_s, unknown.bound_s);
}

TEST(TransferBoundTest, ShouldRejectPhasesLongerThanTheStep) {
  // 0.25 + 0.3 > 0.5 s.
  const TransferBound b =
      ComputeTransferBound(WithBackward(Input(30e9, 20e9, 12e9, 50e9, 10e9, 0.5, 0.25), 0.3));
  EXPECT_EQ(b.status, TransferBoundStatus::kInvalid);
}

}  // namespace
}  // namespace chameleon::policy
