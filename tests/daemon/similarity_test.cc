#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "chameleon/daemon/bigram_similarity.h"

namespace chameleon::daemon {
namespace {

std::vector<std::uint32_t> RandomOps(std::size_t n, std::uint32_t alphabet, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> ops(n);
  for (auto& op : ops) op = 16 + static_cast<std::uint32_t>(rng() % alphabet);
  return ops;
}

IterationComparison Incremental(const std::vector<std::uint32_t>& a,
                                const std::vector<std::uint32_t>& b) {
  IterationComparator comparator;
  for (auto t : a) comparator.Add(t);
  EXPECT_FALSE(comparator.Finish({}).has_previous);
  for (auto t : b) comparator.Add(t);
  return comparator.Finish({});
}

TEST(BigramSimilarity, IdenticalIterationsAreSimilarOneAndStable) {
  const auto ops = RandomOps(500, 40, 1);
  const auto result = Incremental(ops, ops);
  EXPECT_DOUBLE_EQ(result.similarity, 1.0);
  EXPECT_EQ(result.length_change, 0.0);
  EXPECT_TRUE(result.stable);
}

TEST(BigramSimilarity, IncrementalMatchesFromScratchComparison) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto a = RandomOps(200 + seed * 13, 5 + seed, seed);
    auto b = a;
    std::mt19937_64 rng(seed * 7);
    for (int i = 0; i < 10; ++i) b[rng() % b.size()] = 16 + rng() % 9;
    b.resize(b.size() - seed);
    const auto incremental = Incremental(a, b);
    const auto scratch = CompareIterations(a, b, {});
    EXPECT_NEAR(incremental.similarity, scratch.similarity, 1e-12) << "seed " << seed;
    EXPECT_EQ(incremental.stable, scratch.stable);
    EXPECT_EQ(incremental.ops, b.size());
    EXPECT_EQ(incremental.previous_ops, a.size());
  }
}

TEST(BigramSimilarity, OneInsertedOpInAHundredStaysStable) {
  const auto a = RandomOps(100, 30, 3);
  auto b = a;
  b.insert(b.begin() + 50, 999);
  const auto result = CompareIterations(a, b, {});
  EXPECT_GT(result.similarity, 0.95);
  EXPECT_TRUE(result.stable);
}

TEST(BigramSimilarity, ReorderedIterationIsUnstableThoughUnigramCountsMatch) {
  std::vector<std::uint32_t> a;
  for (int i = 0; i < 100; ++i) a.push_back(16 + i % 10);
  auto b = a;
  std::sort(b.begin(), b.end());  // same multiset of ops, different order
  const auto result = CompareIterations(a, b, {});
  EXPECT_LT(result.similarity, 0.5);
  EXPECT_FALSE(result.stable);
}

TEST(BigramSimilarity, LengthChangeOfSixPercentIsUnstableEvenWhenSimilar) {
  std::vector<std::uint32_t> a;
  for (int i = 0; i < 200; ++i) a.push_back(16 + i % 10);
  auto b = a;
  b.insert(b.end(), a.begin(), a.begin() + 12);  // +6 %, same bigrams
  const auto result = CompareIterations(a, b, {});
  EXPECT_GT(result.similarity, 0.95);
  EXPECT_NEAR(result.length_change, 0.06, 1e-9);
  EXPECT_FALSE(result.stable);
}

TEST(BigramSimilarity, ThresholdsAreStrict) {
  EXPECT_FALSE(Judge(0.95, 100, 100, {0.95, 0.05}).stable);
  EXPECT_TRUE(Judge(0.9501, 100, 104, {0.95, 0.05}).stable);
  EXPECT_FALSE(Judge(0.99, 100, 105, {0.95, 0.05}).stable);
}

TEST(BigramCounts, ClearForgetsAndGrowthKeepsCounts) {
  BigramCounts counts(16);
  for (std::uint64_t k = 0; k < 1000; ++k) counts.Increment(k * 7919);
  for (std::uint64_t k = 0; k < 1000; ++k) ASSERT_EQ(counts.Get(k * 7919), 1u);
  EXPECT_EQ(counts.Increment(7919), 2u);
  EXPECT_EQ(counts.size(), 1000u);
  counts.Clear();
  EXPECT_EQ(counts.size(), 0u);
  EXPECT_EQ(counts.Get(7919), 0u);
  EXPECT_EQ(counts.Increment(7919), 1u);
}

TEST(IterationComparator, DiscardKeepsThePreviousIteration) {
  const auto a = RandomOps(100, 20, 5);
  IterationComparator comparator;
  for (auto t : a) comparator.Add(t);
  comparator.Finish({});
  for (auto t : RandomOps(300, 20, 6)) comparator.Add(t);
  comparator.DiscardCurrent();
  for (auto t : a) comparator.Add(t);
  const auto result = comparator.Finish({});
  EXPECT_DOUBLE_EQ(result.similarity, 1.0);
  EXPECT_EQ(result.previous_ops, 100u);
}

}  // namespace
}  // namespace chameleon::daemon
