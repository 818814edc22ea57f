// The reference searches (placement_baselines.h) on spaces small enough to count by hand.
#include "chameleon/topology/placement_baselines.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

namespace chameleon::topology {
namespace {

// The placements visited, as a set: the order of the walk is not part of the contract.
std::set<std::vector<std::tuple<int, int, std::uint64_t>>> All(
    const std::vector<SwapDemand>& demands, const std::vector<Helper>& helpers,
    std::uint64_t quantum) {
  std::set<std::vector<std::tuple<int, int, std::uint64_t>>> all;
  ForEachPlacement(demands, helpers, quantum, [&](const std::vector<Grant>& grants) {
    std::vector<std::tuple<int, int, std::uint64_t>> p;
    for (const Grant& g : grants) p.emplace_back(g.sender, g.helper, g.bytes);
    EXPECT_TRUE(all.insert(p).second) << "visited twice";
  });
  return all;
}

TEST(PlacementBaselinesTest, ShouldEnumerateEveryCoveringSplitWithinCapacities) {
  // One demand of 2 units over helpers with room for 2 and 1: (2, 0) and (1, 1).
  using P = std::vector<std::tuple<int, int, std::uint64_t>>;
  EXPECT_EQ(All({{0, 20, 0, 0}}, {{1, 20}, {2, 10}}, 10),
            (std::set<P>{P{{0, 0, 20}}, P{{0, 0, 10}, {0, 1, 10}}}));
  // Two demands of 1 unit, two helpers of 1: each helper takes one of them.
  EXPECT_EQ(All({{0, 10, 0, 0}, {1, 10, 0, 0}}, {{2, 10}, {3, 10}}, 10).size(), 2u);
  // 3 units over 3 roomy helpers: C(3 + 2, 2) = 10 compositions.
  EXPECT_EQ(ForEachPlacement({{0, 3, 0, 0}}, {{1, 9}, {2, 9}, {3, 9}}, 1, [](const auto&) {}), 10u);
  // Too little room: nothing covers.
  EXPECT_EQ(ForEachPlacement({{0, 3, 0, 0}}, {{1, 2}}, 1, [](const auto&) {}), 0u);
  // The limit stops the walk.
  EXPECT_EQ(ForEachPlacement(
                {{0, 3, 0, 0}}, {{1, 9}, {2, 9}, {3, 9}}, 1, [](const auto&) {}, 4),
            4u);
}

// gpu0 (10 s window) and gpu1 (none) each move 60 B; gpu2 lends 60 over 400 B/s, numa0 has
// room over 50 B/s. The optimum gives gpu2 to gpu1: 1 + 2 × 60/400 = 1.3 s (see
// node_placement_test.cc for the greedy 3.4 s).
Topology Node() {
  Topology t;
  for (const char* name : {"gpu0", "gpu1", "gpu2"}) t.AddPlace({name, PlaceKind::kGpu, 0, 0});
  const int numa = t.AddPlace({"numa0", PlaceKind::kNumaNode, 0, 0});
  for (int g = 0; g < 3; ++g) t.AddDuplex(g, numa, 50);
  t.AddDuplex(0, 2, 400);
  t.AddDuplex(1, 2, 400);
  t.Finalize();
  return t;
}

TEST(PlacementBaselinesTest, ShouldFindTheOptimumExhaustivelyAndRandomlyOnATinySpace) {
  const Topology t = Node();
  const std::vector<SwapDemand> demands{{0, 60, 10, 1}, {1, 60, 0, 1}};
  const std::vector<Helper> helpers{{2, 60}, {3, 1000}};
  // Units of 30 B: gpu2's 2 units split 0/1/2 ways between the two demands -> 6 placements.
  const BaselineResult best = ExhaustiveOptimum(t, demands, helpers, 30, 3.4);
  EXPECT_EQ(best.evaluations, 6u);
  EXPECT_EQ(best.best, (std::vector<Grant>{{0, 1, 60}, {1, 0, 60}}));
  EXPECT_DOUBLE_EQ(PredictedIterationSeconds(t, demands, helpers, best.best), 1.3);
  const BaselineResult random = RandomSearch(t, demands, helpers, 30, 3.4, 6, 9);
  EXPECT_EQ(random.evaluations, 6u);  // the whole space, found within 600 draws
  EXPECT_EQ(random.best, best.best);
  // More evaluations than the space holds: stops at the space, after 100 x budget draws.
  EXPECT_EQ(RandomSearch(t, demands, helpers, 30, 3.4, 50, 9).evaluations, 6u);
}

TEST(PlacementBaselinesTest, ShouldDrawTheSameSequenceForASeed) {
  const Topology t = Node();
  const std::vector<SwapDemand> demands{{0, 90, 0.5, 1}, {1, 60, 0, 1}};
  const std::vector<Helper> helpers{{2, 60}, {3, 1000}};
  const BaselineResult a = RandomSearch(t, demands, helpers, 30, 2, 4, 77);
  const BaselineResult b = RandomSearch(t, demands, helpers, 30, 2, 4, 77);
  EXPECT_EQ(a.best, b.best);
  EXPECT_EQ(a.evaluations, 4u);
  EXPECT_DOUBLE_EQ(a.best_fitness, b.best_fitness);
}

}  // namespace
}  // namespace chameleon::topology
