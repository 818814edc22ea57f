// Route tables on hand-made graphs, the wafer presets and the YAML schema.
#include "chameleon/topology/topology.h"

#include <gtest/gtest.h>

#include "chameleon/topology/topology_yaml.h"
#include "chameleon/topology/wafer.h"

namespace chameleon::topology {
namespace {

TEST(WaferTest, ShouldGiveManhattanHopsAndOneLinkBandwidthOnA3x3Mesh) {
  WaferSpec spec{"t", 3, 3, 1000, 10.0, 1.0};
  const Topology t = BuildWafer(spec);
  ASSERT_EQ(t.place_count(), 9);
  EXPECT_EQ(t.links().size(), 24u);  // 12 neighbour pairs, both directions
  const int corner = DieIndex(spec, 0, 0);
  const int far = DieIndex(spec, 2, 2);
  EXPECT_EQ(t.Hops(corner, far), 4);
  EXPECT_EQ(ManhattanHops(spec, corner, far), 4);
  EXPECT_DOUBLE_EQ(t.SecondsPerByte(corner, far), 4 / 10.0);
  EXPECT_DOUBLE_EQ(t.Bandwidth(corner, far), 10.0);
  EXPECT_DOUBLE_EQ(t.Latency(corner, far), 4 * 100e-9);
  EXPECT_EQ(t.Hops(4, 4), 0);
  const std::vector<int> route = t.Route(corner, far);
  ASSERT_EQ(route.size(), 5u);
  for (std::size_t i = 1; i < route.size(); ++i) {
    EXPECT_GE(t.LinkIndex(route[i - 1], route[i]), 0) << "route must follow links";
  }
  EXPECT_EQ(t.place(DieIndex(spec, 2, 1)).name, "die(2,1)");
}

TEST(WaferTest, ShouldKnowThePublicPresetsAndNotConfig2) {
  const auto c1 = WaferPreset("config1");
  ASSERT_TRUE(c1.has_value());
  EXPECT_EQ(c1->dies(), 56);
  EXPECT_EQ(c1->dram_per_die, 48'000'000'000ULL);
  EXPECT_DOUBLE_EQ(c1->d2d_bandwidth, 4.5e12);
  EXPECT_DOUBLE_EQ(c1->flops_per_die, 512e12);
  EXPECT_EQ(WaferPreset("config3")->dram_per_die, 70'000'000'000ULL);
  EXPECT_DOUBLE_EQ(WaferPreset("config4")->d2d_bandwidth, 3.5e12);
  EXPECT_FALSE(WaferPreset("config2").has_value());
}

TEST(TopologyTest, ShouldPreferTheFasterTwoHopRouteAndKeepDirectionsApart) {
  // gpu0 -> gpu1 direct at 1 B/s, or via a switch at 10 B/s per hop (0.2 s/B < 1 s/B).
  Topology t;
  const int g0 = t.AddPlace({"gpu0", PlaceKind::kGpu, 100, 0});
  const int g1 = t.AddPlace({"gpu1", PlaceKind::kGpu, 100, 0});
  const int sw = t.AddPlace({"switch", PlaceKind::kOther, 0, 0});
  t.AddLink(g0, g1, 1.0);
  t.AddLink(g1, g0, 100.0);
  t.AddDuplex(g0, sw, 10.0);
  t.AddDuplex(sw, g1, 10.0);
  t.Finalize();
  EXPECT_EQ(t.Hops(g0, g1), 2);
  EXPECT_DOUBLE_EQ(t.SecondsPerByte(g0, g1), 0.2);
  EXPECT_EQ(t.Hops(g1, g0), 1);
  EXPECT_DOUBLE_EQ(t.SecondsPerByte(g1, g0), 0.01);
  EXPECT_EQ(t.Route(g0, g1), (std::vector<int>{g0, sw, g1}));
}

TEST(TopologyTest, ShouldMarkDisconnectedPlacesUnreachable) {
  Topology t;
  t.AddPlace({"a", PlaceKind::kGpu, 1, 0});
  t.AddPlace({"b", PlaceKind::kGpu, 1, 0});
  t.Finalize();
  EXPECT_EQ(t.Hops(0, 1), kUnreachable);
  EXPECT_TRUE(t.Route(0, 1).empty());
  EXPECT_THROW(t.AddLink(0, 0, 1.0), std::invalid_argument);
}

TEST(TopologyYamlTest, ShouldOverrideAPresetAndParseANodeGraph) {
  const auto wafer = ParseTopologyYaml(
      "wafer: {preset: config3, name: small, width: 2, height: 3, dram_per_die_gb: 10}\n");
  const auto& spec = std::get<WaferSpec>(wafer);
  EXPECT_EQ(spec.name, "small");
  EXPECT_EQ(spec.dies(), 6);
  EXPECT_EQ(spec.dram_per_die, 10'000'000'000ULL);
  EXPECT_DOUBLE_EQ(spec.d2d_bandwidth, 4e12);  // kept from the preset

  const auto node = ParseTopologyYaml(
      "places:\n"
      "  - {name: gpu0, kind: gpu, capacity_gb: 141}\n"
      "  - {name: numa0, kind: numa, capacity_gb: 1024}\n"
      "links:\n"
      "  - {from: gpu0, to: numa0, gb_per_s: 46.8, duplex: true}\n");
  const auto& t = std::get<Topology>(node);
  EXPECT_EQ(t.place(1).kind, PlaceKind::kNumaNode);
  EXPECT_DOUBLE_EQ(t.Bandwidth(0, 1), 46.8e9);
  EXPECT_THROW(ParseTopologyYaml("links: []\n"), std::runtime_error);
  EXPECT_THROW(ParseTopologyYaml("places: [{name: a}]\nlinks: [{from: a, to: z, gb_per_s: 1}]\n"),
               std::runtime_error);
}

}  // namespace
}  // namespace chameleon::topology
