// The genetic optimiser on a toy problem whose optimum is known: 12 bits, fitness = number of
// bits that differ from a target pattern (plus one so no score is 0).
#include "chameleon/topology/genetic.h"

#include <gtest/gtest.h>

namespace chameleon::topology {
namespace {

using Bits = std::vector<int>;
const Bits kTarget{1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0};

GeneticProblem<Bits> Problem(int flippable = 12) {
  GeneticProblem<Bits> p;
  p.fitness = [](const Bits& b) {
    double d = 1;
    for (std::size_t i = 0; i < b.size(); ++i) d += b[i] != kTarget[i];
    return d;
  };
  p.key = [](const Bits& b) { return std::string(b.begin(), b.end()); };
  p.operators.push_back([flippable](Bits& b, Rng& rng) {
    b[rng.Index(flippable)] ^= 1;
    return true;
  });
  return p;
}

TEST(GeneticTest, ShouldFindTheOptimumWithinABudgetOfTenPercentOfTheSpace) {
  GeneticOptions o;
  o.max_evaluations = 409;  // 10 % of 2^12
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    o.seed = seed;
    const auto r = RunGenetic(Bits(12, 0), Problem(), o);
    EXPECT_EQ(r.best, kTarget) << "seed " << seed;
    EXPECT_LE(r.evaluations, 409u);
  }
}

TEST(GeneticTest, ShouldBeDeterministicForASeedAndDifferAcrossSeeds) {
  GeneticOptions o;
  o.max_generations = 3;
  o.seed = 42;
  const auto a = RunGenetic(Bits(12, 0), Problem(), o);
  const auto b = RunGenetic(Bits(12, 0), Problem(), o);
  EXPECT_EQ(a.best, b.best);
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_EQ(a.best_fitness, b.best_fitness);
}

TEST(GeneticTest, ShouldNeverReturnWorseThanTheStartAndStopAtTheBudget) {
  GeneticOptions o;
  o.max_evaluations = 5;
  const auto r = RunGenetic(kTarget, Problem(), o);
  EXPECT_EQ(r.best, kTarget);
  EXPECT_EQ(r.best_fitness, 1.0);
  EXPECT_EQ(r.evaluations, 5u);
}

TEST(GeneticTest, ShouldOnlyChangeWhatThePluggedOperatorsChange) {
  GeneticOptions o;
  o.max_generations = 30;
  const auto r = RunGenetic(Bits(12, 0), Problem(4), o);
  EXPECT_EQ(Bits(r.best.begin(), r.best.begin() + 4), Bits(kTarget.begin(), kTarget.begin() + 4));
  EXPECT_EQ(Bits(r.best.begin() + 4, r.best.end()), Bits(8, 0));
}

TEST(GeneticTest, ShouldStopAfterStallGenerations) {
  GeneticOptions o;
  o.max_generations = 1000;
  o.stall_generations = 5;
  const auto r = RunGenetic(kTarget, Problem(), o);
  EXPECT_EQ(r.generations, 5);
}

TEST(TimeCostFitnessTest, ShouldRankPlansWithoutBorrowingByTimeInsteadOfTyingAtZero) {
  // Two plans that borrow nothing: WATOS's product gives both 0; ours keeps t.
  EXPECT_DOUBLE_EQ(TimeCostFitness(2.0, 0.0, 1.0), 2.0);
  EXPECT_LT(TimeCostFitness(1.0, 0.0, 1.0), TimeCostFitness(2.0, 0.0, 1.0));
  // With borrowing, the cost counts in units of t_ref: 1 × (1 + 0.5 / 1) = 1.5.
  EXPECT_DOUBLE_EQ(TimeCostFitness(1.0, 0.5, 1.0), 1.5);
  EXPECT_LT(TimeCostFitness(1.0, 0.2, 1.0), TimeCostFitness(1.0, 0.4, 1.0));
}

}  // namespace
}  // namespace chameleon::topology
