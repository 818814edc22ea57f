// PlaceNode and its time model on hand-made nodes whose answers are worked out in the comments.
#include "chameleon/topology/node_placement.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace chameleon::topology {
namespace {

// Two sockets: gpu0, gpu1 on numa0 and gpu2, gpu3 on numa1, each GPU on a 50 B/s PCIe link to
// its socket, the sockets joined by a 40 B/s link, NVLink (400 B/s) between gpu0-gpu1 and
// gpu2-gpu3, and gpu0-gpu2, gpu1-gpu2 when `nvlink_to_gpu2`. Places 0-3 are the GPUs, 4-5 the
// NUMA nodes. Small byte counts keep every figure exact.
enum : int { kGpu0, kGpu1, kGpu2, kGpu3, kNuma0, kNuma1 };
Topology TwoSockets(bool nvlink_to_gpu2 = false) {
  Topology t;
  for (int g = 0; g < 4; ++g) t.AddPlace({"gpu" + std::to_string(g), PlaceKind::kGpu, 1000, 0});
  t.AddPlace({"numa0", PlaceKind::kNumaNode, 10000, 0});
  t.AddPlace({"numa1", PlaceKind::kNumaNode, 10000, 0});
  t.AddDuplex(kGpu0, kNuma0, 50);
  t.AddDuplex(kGpu1, kNuma0, 50);
  t.AddDuplex(kGpu2, kNuma1, 50);
  t.AddDuplex(kGpu3, kNuma1, 50);
  t.AddDuplex(kNuma0, kNuma1, 40);
  t.AddDuplex(kGpu0, kGpu1, 400);
  t.AddDuplex(kGpu2, kGpu3, 400);
  if (nvlink_to_gpu2) {
    t.AddDuplex(kGpu0, kGpu2, 400);
    t.AddDuplex(kGpu1, kGpu2, 400);
  }
  t.Finalize();
  return t;
}

NodePlacementOptions GreedyOnly() {
  NodePlacementOptions o;
  o.genetic = false;
  return o;
}

TEST(NodePlacementTest, ShouldPreferTheLocalNumaNodeOverTheRemoteOne) {
  const Topology t = TwoSockets();
  // gpu0 -> numa0 costs 1/50 s/B; -> numa1 1/50 + 1/40. Remote listed first: still local.
  const std::vector<SwapDemand> demands{{kGpu0, 100, 0, 1}};
  const std::vector<Helper> helpers{{kNuma1, 1000}, {kNuma0, 1000}};
  const NodePlacement p = PlaceNode(t, demands, helpers, GreedyOnly());
  ASSERT_TRUE(p.allocation.ok()) << p.allocation.error;
  EXPECT_EQ(p.allocation.grants, (std::vector<Grant>{{0, 1, 100}}));
  EXPECT_DOUBLE_EQ(p.global_cost, 100.0 / 50);
}

TEST(NodePlacementTest, ShouldPreferAPeerGpuWithRoomOverHostMemory) {
  const Topology t = TwoSockets();
  // gpu1 lends 60 over NVLink (1/400 s/B), numa0 takes the other 40 (1/50 s/B).
  const std::vector<SwapDemand> demands{{kGpu0, 100, 1.0, 10.0}};
  const std::vector<Helper> helpers{{kNuma0, 1000}, {kGpu1, 60}};
  const NodePlacement p = PlaceNode(t, demands, helpers, GreedyOnly());
  ASSERT_TRUE(p.allocation.ok()) << p.allocation.error;
  EXPECT_EQ(p.allocation.grants, (std::vector<Grant>{{0, 0, 40}, {0, 1, 60}}));
  EXPECT_DOUBLE_EQ(p.global_cost, 60.0 / 400 + 40.0 / 50);  // 0.95 s
  // Out: max(60/400, 40/50) = 0.8 s, back the same: 1.6 s, 1 s of it hidden -> 10.6 s.
  EXPECT_DOUBLE_EQ(p.predicted_iteration_s, 10.6);
  EXPECT_NEAR(p.predicted_penalty_s, 0.6, 1e-12);
  EXPECT_EQ(p.evaluations, 1u);
}

TEST(NodePlacementTest, ShouldShareTheInterSocketLinkBetweenConcurrentTransfers) {
  const Topology t = TwoSockets();
  const std::vector<Helper> helpers{{kNuma1, 1000}};
  // Alone: gpu0 -> numa0 -> numa1 drains at the 40 B/s link: 100/40 = 2.5 s each way -> 1 + 5.
  const std::vector<SwapDemand> one{{kGpu0, 100, 0, 1.0}};
  EXPECT_DOUBLE_EQ(PredictedIterationSeconds(t, one, helpers, {{0, 0, 100}}), 6.0);
  // gpu0 and gpu1 both cross it: 200/40 = 5 s each way, for both -> 1 + 10.
  const std::vector<SwapDemand> two{{kGpu0, 100, 0, 1.0}, {kGpu1, 100, 0, 1.0}};
  EXPECT_DOUBLE_EQ(PredictedIterationSeconds(t, two, helpers, {{0, 0, 100}, {1, 0, 100}}), 11.0);
  // Windows hide transfers: with a 10 s window only gpu1's (1 s window) penalty shows: 1 + 9.
  const std::vector<SwapDemand> hidden{{kGpu0, 100, 10, 1.0}, {kGpu1, 100, 1, 1.0}};
  EXPECT_DOUBLE_EQ(PredictedIterationSeconds(t, hidden, helpers, {{0, 0, 100}, {1, 0, 100}}), 10.0);
}

TEST(NodePlacementTest, ShouldShareOnePeersLinkBetweenTwoBorrowers) {
  // Three GPUs on an NVSwitch (a place that holds nothing), 400 B/s each way per GPU.
  Topology t;
  for (int g = 0; g < 3; ++g) t.AddPlace({"gpu" + std::to_string(g), PlaceKind::kGpu, 1000, 0});
  const int sw = t.AddPlace({"nvswitch", PlaceKind::kOther, 0, 0});
  for (int g = 0; g < 3; ++g) t.AddDuplex(g, sw, 400);
  t.Finalize();
  const std::vector<Helper> helpers{{2, 120}};
  // gpu0 alone borrows 60 from gpu2: 60/400 = 0.15 s each way -> 1 + 0.3.
  EXPECT_DOUBLE_EQ(PredictedIterationSeconds(t, {{0, 60, 0, 1}}, helpers, {{0, 0, 60}}), 1.3);
  // gpu0 and gpu1 both borrow 60: the switch -> gpu2 link carries 120: 0.3 s each way -> 1.6.
  const std::vector<SwapDemand> two{{0, 60, 0, 1}, {1, 60, 0, 1}};
  EXPECT_DOUBLE_EQ(PredictedIterationSeconds(t, two, helpers, {{0, 0, 60}, {1, 0, 60}}), 1.6);
}

TEST(NodePlacementTest, ShouldNameTheShortDemandAndItsBytesWhenInfeasible) {
  const Topology t = TwoSockets();
  // Demand 180, spare 110: gpu0 takes gpu1's 60 and numa0's 40; gpu2 gets numa0's last 10.
  const std::vector<SwapDemand> demands{{kGpu0, 100, 0, 1}, {kGpu2, 80, 0, 1}};
  const std::vector<Helper> helpers{{kNuma0, 50}, {kGpu1, 60}};
  const NodePlacement p = PlaceNode(t, demands, helpers, NodePlacementOptions{});
  EXPECT_FALSE(p.allocation.ok());
  EXPECT_EQ(p.allocation.uncovered, 70u);
  EXPECT_EQ(p.allocation.error,
            "demand 1 (gpu2): 70 bytes of 80 bytes found no reachable helper with room; total "
            "demand 180 bytes, total spare 110 bytes");
  EXPECT_EQ(p.allocation.grants, (std::vector<Grant>{{0, 0, 40}, {0, 1, 60}, {1, 0, 10}}));
}

TEST(NodePlacementTest, ShouldRejectPlacesOutsideTheTopologyAndBadTimes) {
  const Topology t = TwoSockets();
  const std::vector<Helper> helpers{{kNuma0, 50}};
  const NodePlacement bad_place = PlaceNode(t, {{9, 10, 0, 1}}, helpers, GreedyOnly());
  EXPECT_EQ(bad_place.allocation.error, "demand 0 names place 9, outside the topology's 6 places");
  EXPECT_TRUE(bad_place.allocation.grants.empty());
  const NodePlacement bad_helper = PlaceNode(t, {{kGpu0, 10, 0, 1}}, {{-1, 5}}, GreedyOnly());
  EXPECT_EQ(bad_helper.allocation.error,
            "helper 0 names place -1, outside the topology's 6 places");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const NodePlacement bad_time = PlaceNode(t, {{kGpu0, 10, nan, 1}}, helpers, GreedyOnly());
  EXPECT_EQ(bad_time.allocation.error,
            "demand 0 (gpu0): window_s and iteration_s must be finite and not negative");
}

TEST(PlacementFitnessTest, ShouldOrderPlansByTimeWhenNothingIsBorrowed) {
  const Topology t = TwoSockets();
  // GlobalCost 0 (no grants) must not tie every plan at 0: fitness is then t itself.
  EXPECT_DOUBLE_EQ(PlacementFitness(t, {{kGpu0, 0, 0, 2.0}}, {}, {}, 5.0), 2.0);
  EXPECT_DOUBLE_EQ(PlacementFitness(t, {{kGpu0, 0, 0, 3.0}}, {}, {}, 5.0), 3.0);
}

TEST(PlacementFitnessTest, ShouldStillOrderByCostWhenEveryTransferHidesAndNoTimeIsKnown) {
  const Topology t = TwoSockets();
  // t = 0 (no iteration time, a 100 s window); the 1 ns floor keeps cost deciding.
  const std::vector<SwapDemand> demands{{kGpu0, 100, 100, 0}};
  const std::vector<Helper> helpers{{kNuma0, 1000}, {kNuma1, 1000}};
  const double local = PlacementFitness(t, demands, helpers, {{0, 0, 100}}, 0);
  const double remote = PlacementFitness(t, demands, helpers, {{0, 1, 100}}, 0);
  EXPECT_GT(local, 0);
  EXPECT_LT(local, remote);
}

TEST(NodePlacementTest, ShouldGiveThePeerToTheClientThatCannotHideItsTransfers) {
  const Topology t = TwoSockets(/*nvlink_to_gpu2=*/true);
  // gpu0 (10 s window) and gpu1 (no window) each move 60; gpu2 lends 60 over NVLink, numa0 the
  // rest. Greedy serves gpu0 first: it takes gpu2, gpu1 goes to numa0 at 60/50 = 1.2 s each way
  // -> 1 + 2.4 = 3.4 s. Swapped: gpu0's 2.4 s hide in its window, gpu1's 0.15 + 0.15 -> 1.3 s.
  // GlobalCost is the same both ways, so only the time model tells them apart.
  const std::vector<SwapDemand> demands{{kGpu0, 60, 10, 1}, {kGpu1, 60, 0, 1}};
  const std::vector<Helper> helpers{{kGpu2, 60}, {kNuma0, 1000}};
  const NodePlacement greedy = PlaceNode(t, demands, helpers, GreedyOnly());
  EXPECT_EQ(greedy.allocation.grants, (std::vector<Grant>{{0, 0, 60}, {1, 1, 60}}));
  EXPECT_DOUBLE_EQ(greedy.predicted_iteration_s, 3.4);
  const NodePlacement ga = PlaceNode(t, demands, helpers, NodePlacementOptions{});
  ASSERT_TRUE(ga.allocation.ok()) << ga.allocation.error;
  EXPECT_EQ(ga.allocation.grants, (std::vector<Grant>{{0, 1, 60}, {1, 0, 60}}));
  EXPECT_DOUBLE_EQ(ga.predicted_iteration_s, 1.3);
  EXPECT_DOUBLE_EQ(ga.greedy_fitness, greedy.fitness);
  EXPECT_LT(ga.fitness, ga.greedy_fitness);
  EXPECT_DOUBLE_EQ(ga.global_cost, greedy.global_cost);
}

TEST(NodePlacementTest, ShouldBeDeterministicForASeed) {
  const Topology t = TwoSockets(true);
  const std::vector<SwapDemand> demands{{kGpu0, 300, 2, 5}, {kGpu1, 200, 0, 4}, {kGpu3, 250, 1, 6}};
  const std::vector<Helper> helpers{{kGpu2, 200}, {kNuma0, 300}, {kNuma1, 400}};
  NodePlacementOptions o;
  o.quantum = 50;
  o.genetic_options.seed = 42;
  const NodePlacement a = PlaceNode(t, demands, helpers, o);
  const NodePlacement b = PlaceNode(t, demands, helpers, o);
  ASSERT_TRUE(a.allocation.ok()) << a.allocation.error;
  EXPECT_EQ(a.allocation.grants, b.allocation.grants);
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_DOUBLE_EQ(a.fitness, b.fitness);
  EXPECT_LE(a.fitness, a.greedy_fitness);
  EXPECT_EQ(CheckAllocation({{kGpu0, 300}, {kGpu1, 200}, {kGpu3, 250}}, helpers,
                            a.allocation.grants, true),
            "");
}

}  // namespace
}  // namespace chameleon::topology
