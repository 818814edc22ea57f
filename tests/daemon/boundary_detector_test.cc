#include "chameleon/daemon/boundary_detector.h"

#include <gtest/gtest.h>

#include <random>

#include "synthetic_stream.h"

namespace chameleon::daemon {
namespace {

using testing::LoopSpec;
using testing::MakeLoop;

TEST(BoundaryDetector, FindsThePeriodAndTheFirstOpOfTheStepAfterAPrelude) {
  LoopSpec spec;
  const auto stream = MakeLoop(spec, 8);
  const auto boundary = DetectBoundary(stream.tokens, {});
  ASSERT_TRUE(boundary.has_value());
  EXPECT_EQ(boundary->period, stream.step_ops[0]);
  EXPECT_EQ(boundary->first, stream.step_starts[0]);
  // The signature recurs exactly at the start of every step.
  const auto cuts = FindOccurrences(stream.tokens, boundary->signature, boundary->first);
  EXPECT_EQ(cuts, stream.step_starts);
  EXPECT_GE(boundary->confirmed, 3u);
}

TEST(BoundaryDetector, PrefersTheIterationOverTheRepeatedLayer) {
  // 24 identical layers: layer-level tokens recur 24 times per step with a regular gap except
  // once; the iteration is still the period.
  LoopSpec spec;
  spec.layers = 24;
  const auto stream = MakeLoop(spec, 7);
  const auto boundary = DetectBoundary(stream.tokens, {});
  ASSERT_TRUE(boundary.has_value());
  EXPECT_EQ(boundary->period, stream.step_ops[0]);
  EXPECT_EQ(boundary->first, stream.step_starts[0]);
}

TEST(BoundaryDetector, ToleratesAFewPercentOfInsertedAndRemovedOps) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    LoopSpec spec;
    spec.perturb_rate = 0.03;
    spec.seed = seed;
    const auto stream = MakeLoop(spec, 10);
    const auto boundary = DetectBoundary(stream.tokens, {});
    ASSERT_TRUE(boundary.has_value()) << "seed " << seed;
    const double error = std::abs(double(boundary->period) - double(stream.step_ops[0]));
    EXPECT_LE(error, 0.05 * double(stream.step_ops[0])) << "seed " << seed;
    EXPECT_EQ(boundary->first, stream.step_starts[0]) << "seed " << seed;
  }
}

TEST(BoundaryDetector, NeedsEnoughPeriodsToConfirm) {
  LoopSpec spec;
  const auto stream = MakeLoop(spec, 3);  // three steps: two comparisons at most
  EXPECT_FALSE(DetectBoundary(stream.tokens, {}).has_value());
}

TEST(BoundaryDetector, FindsNothingInAStreamWithoutPeriod) {
  std::mt19937_64 rng(9);
  std::vector<std::uint32_t> tokens(20000);
  for (auto& t : tokens) t = 16 + rng() % 50;
  EXPECT_FALSE(DetectBoundary(tokens, {}).has_value());
  EXPECT_FALSE(DetectBoundary({}, {}).has_value());
}

TEST(BoundaryDetector, UsesALongerGramWhenNoSingleOpIsOncePerIteration) {
  // A B A C repeated: A is every other op, B and C alternate; "A B" starts the iteration.
  std::vector<std::uint32_t> tokens;
  for (int i = 0; i < 12; ++i) {
    for (std::uint32_t t : {16u, 17u, 16u, 18u, 19u, 19u, 20u, 16u}) tokens.push_back(t);
  }
  const auto boundary = DetectBoundary(tokens, {});
  ASSERT_TRUE(boundary.has_value());
  EXPECT_EQ(boundary->period, 8u);
  EXPECT_EQ(FindOccurrences(tokens, boundary->signature).size(), 12u);
}

TEST(BoundaryDetector, DynamicLoopStillHasItsBoundary) {
  LoopSpec spec;
  spec.dynamic = 4;
  const auto stream = MakeLoop(spec, 24);
  const auto boundary = DetectBoundary(stream.tokens, {});
  ASSERT_TRUE(boundary.has_value());
  EXPECT_EQ(FindOccurrences(stream.tokens, boundary->signature, boundary->first),
            stream.step_starts);
}

TEST(FindOccurrences, CountsNonOverlappingMatchesFromAnOffset) {
  const std::vector<std::uint32_t> tokens{1, 1, 1, 2, 1, 1};
  const std::vector<std::uint32_t> gram{1, 1};
  EXPECT_EQ(FindOccurrences(tokens, gram), (std::vector<std::size_t>{0, 4}));
  EXPECT_EQ(FindOccurrences(tokens, gram, 1), (std::vector<std::size_t>{1, 4}));
  EXPECT_TRUE(FindOccurrences(tokens, {}).empty());
}

}  // namespace
}  // namespace chameleon::daemon
