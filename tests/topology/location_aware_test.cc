// Algorithm 3 and the pairing operators on meshes small enough to work out by hand.
#include "chameleon/topology/location_aware.h"

#include <gtest/gtest.h>

#include "chameleon/topology/wafer.h"

namespace chameleon::topology {
namespace {

// 3 x 3 mesh, 10 B/s links. Indices: row-major, die (x, y) = 3y + x.
Topology Mesh3x3() { return BuildWafer(WaferSpec{"t", 3, 3, 1000, 10.0, 1.0}); }

TEST(LocationAwareTest, ShouldTakeNearestHelpersUntilCoveredOnA3x3Mesh) {
  const Topology t = Mesh3x3();
  // Sender at the centre (4) needs 150. Helpers: corner 0 (2 hops, 500), die 5 (1 hop, 100),
  // die 1 (1 hop, 30). Nearest first, ties by index: die 1 gives 30, die 5 gives 100, then the
  // corner the remaining 20.
  const std::vector<Sender> senders{{4, 150}};
  const std::vector<Helper> helpers{{0, 500}, {5, 100}, {1, 30}};
  const Allocation a = AllocateNearest(t, senders, helpers);
  ASSERT_TRUE(a.ok()) << a.error;
  EXPECT_EQ(a.grants, (std::vector<Grant>{{0, 0, 20}, {0, 1, 100}, {0, 2, 30}}));
  // GlobalCost = Σ hops × bytes / bw = (2·20 + 1·100 + 1·30) / 10 = 17 s.
  EXPECT_DOUBLE_EQ(GlobalCost(t, senders, helpers, a.grants), 17.0);
  EXPECT_EQ(CheckAllocation(senders, helpers, a.grants, true), "");
}

TEST(LocationAwareTest, ShouldRequeueAHelpersRemainderForTheNextSender) {
  const Topology t = Mesh3x3();
  // Senders 0 (corner, 40) then 8 (opposite corner, 50); one helper at the centre with 60 and
  // one at die 2 with 100. Sender 0: centre (2 hops) and die 2 (2 hops) tie -> lower index, the
  // centre, gives 40 and keeps 20. Sender 8: die 2 is 2 hops, the centre 2 hops -> centre's 20
  // first (index 0), then 30 from die 2.
  const std::vector<Sender> senders{{0, 40}, {8, 50}};
  const std::vector<Helper> helpers{{4, 60}, {2, 100}};
  const Allocation a = AllocateNearest(t, senders, helpers);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.grants, (std::vector<Grant>{{0, 0, 40}, {1, 0, 20}, {1, 1, 30}}));
  EXPECT_DOUBLE_EQ(GlobalCost(t, senders, helpers, a.grants), (2 * 40 + 2 * 20 + 2 * 30) / 10.0);
}

TEST(LocationAwareTest, ShouldNameTheShortSenderAndTheBytesWhenInfeasible) {
  const Topology t = BuildWafer(WaferSpec{"t", 2, 2, 1000, 10.0, 1.0});
  const std::vector<Sender> senders{{0, 70}, {3, 50}};
  const std::vector<Helper> helpers{{1, 60}, {2, 40}};
  const Allocation a = AllocateNearest(t, senders, helpers);
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.uncovered, 20u);  // demand 120, spare 100
  EXPECT_EQ(a.error,
            "sender 1 (die(1,1)) is short by 20 bytes; total demand 120 bytes, total spare 100 "
            "bytes");
  EXPECT_EQ(CheckAllocation(senders, helpers, a.grants, false), "");
  EXPECT_NE(CheckAllocation(senders, helpers, a.grants, true), "");
}

TEST(LocationAwareTest, ShouldPreferTheFasterHelperWhenRankedBySecondsPerByte) {
  // A GPU with a peer over a 370 B/s link and a NUMA node over 46.8 B/s: both one hop.
  Topology t;
  const int gpu = t.AddPlace({"gpu0", PlaceKind::kGpu, 100, 0});
  const int numa = t.AddPlace({"numa0", PlaceKind::kNumaNode, 1000, 0});
  const int peer = t.AddPlace({"gpu1", PlaceKind::kGpu, 100, 0});
  t.AddDuplex(gpu, numa, 46.8);
  t.AddDuplex(gpu, peer, 370);
  t.Finalize();
  const std::vector<Sender> senders{{gpu, 50}};
  const std::vector<Helper> helpers{{numa, 1000}, {peer, 30}};
  const Allocation by_time = AllocateNearest(t, senders, helpers, Nearness::kSecondsPerByte);
  EXPECT_EQ(by_time.grants, (std::vector<Grant>{{0, 0, 20}, {0, 1, 30}}));
  const Allocation by_hops = AllocateNearest(t, senders, helpers, Nearness::kHops);
  EXPECT_EQ(by_hops.grants, (std::vector<Grant>{{0, 0, 50}}));  // tie on hops -> index 0
}

TEST(PairingOperatorsTest, ShouldKeepEveryAllocationValid) {
  const std::vector<Sender> senders{{0, 40}, {8, 50}};
  const std::vector<Helper> helpers{{4, 60}, {2, 100}, {6, 30}};
  std::vector<Grant> grants{{0, 0, 40}, {1, 0, 20}, {1, 1, 30}};
  Rng rng(7);
  for (int i = 0; i < 200; ++i) {
    if (i % 2) {
      MutatePairing(grants, helpers, rng);
    } else {
      ExchangePairings(grants, rng);
    }
    ASSERT_EQ(CheckAllocation(senders, helpers, grants, true), "") << "step " << i;
  }
}

TEST(PairingOperatorsTest, ShouldExchangeTheSmallerAmountBetweenTwoSenders) {
  std::vector<Grant> grants{{0, 0, 40}, {1, 1, 30}};
  Rng rng(1);
  ASSERT_TRUE(ExchangePairings(grants, rng));
  // 30 bytes change helpers each way: sender 0 keeps 10 on h0 and gets 30 on h1.
  EXPECT_EQ(grants, (std::vector<Grant>{{0, 0, 10}, {0, 1, 30}, {1, 0, 30}}));
  std::vector<Grant> single{{0, 0, 40}};
  EXPECT_FALSE(ExchangePairings(single, rng));
}

TEST(PairingOperatorsTest, ShouldMoveAGrantOnlyIntoFreeRoom) {
  const std::vector<Helper> helpers{{0, 40}, {1, 25}};
  std::vector<Grant> grants{{0, 0, 40}};
  Rng rng(3);
  ASSERT_TRUE(MutatePairing(grants, helpers, rng));
  EXPECT_EQ(grants, (std::vector<Grant>{{0, 0, 15}, {0, 1, 25}}));
  std::vector<Grant> full{{0, 0, 40}, {0, 1, 25}};
  EXPECT_FALSE(MutatePairing(full, helpers, rng));
}

TEST(PairingOperatorsTest, ShouldMoveWholeQuantaOrTheRemainderWhenGivenAQuantum) {
  const std::vector<Helper> helpers{{0, 100}, {1, 100}};
  Rng rng(5);
  for (int i = 0; i < 50; ++i) {
    std::vector<Grant> grants{{0, 0, 100}};
    ASSERT_TRUE(MutatePairing(grants, helpers, rng, 20));
    ASSERT_EQ(grants.back().helper, 1);  // 1-5 quanta moved; all 5 leave a single grant
    EXPECT_EQ(grants.back().bytes % 20, 0u) << "moved " << grants.back().bytes;
    std::uint64_t total = 0;
    for (const Grant& g : grants) total += g.bytes;
    EXPECT_EQ(total, 100u);
  }
  // Only 15 bytes of room on helper 1, less than a quantum: those 15 move.
  const std::vector<Helper> tight{{0, 100}, {1, 15}};
  std::vector<Grant> grants{{0, 0, 100}};
  ASSERT_TRUE(MutatePairing(grants, tight, rng, 20));
  EXPECT_EQ(grants, (std::vector<Grant>{{0, 0, 85}, {0, 1, 15}}));
}

}  // namespace
}  // namespace chameleon::topology
