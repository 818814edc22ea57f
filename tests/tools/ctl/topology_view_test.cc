// chameleonctl topology, text form: places, links each way, the hop and bandwidth tables and the
// provenance, from a reply written by hand.
#include "topology_view.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace chameleon::ctl {
namespace {

using nlohmann::json;

json Topology() {
  return json::parse(R"({
    "generation": 4,
    "places": [
      {"place": 0, "name": "gpu 0000:18:00.0", "kind": "gpu", "capacity_bytes": 150754820096,
       "pci_bus_id": "0000:18:00.0", "numa_node": 0, "peers": ["0000:19:00.0"]},
      {"place": 1, "name": "gpu 0000:19:00.0", "kind": "gpu", "capacity_bytes": 150754820096,
       "pci_bus_id": "0000:19:00.0", "numa_node": 0, "peers": []},
      {"place": 2, "name": "numa0", "kind": "numa", "capacity_bytes": 1099511627776,
       "numa_node": 0, "distances": [10]}],
    "links": [
      {"a": "gpu 0000:18:00.0", "b": "numa0", "a_to_b_bandwidth": 4.68e10,
       "b_to_a_bandwidth": 5.48e10, "latency_s": 1e-6},
      {"a": "gpu 0000:18:00.0", "b": "gpu 0000:19:00.0", "a_to_b_bandwidth": 3.7e11,
       "b_to_a_bandwidth": 0, "latency_s": 1e-6}],
    "routes": [
      {"from": "gpu 0000:18:00.0", "to": "gpu 0000:19:00.0", "reachable": true, "hops": 1,
       "bandwidth": 3.7e11},
      {"from": "gpu 0000:19:00.0", "to": "gpu 0000:18:00.0", "reachable": true, "hops": 2,
       "bandwidth": 4.68e10},
      {"from": "numa0", "to": "gpu 0000:19:00.0", "reachable": false}],
    "provenance": {"gpus": "hello", "numa": "yaml", "nvml": "cannot load libnvidia-ml.so.1"},
    "warnings": ["GPU 0000:19:00.0: NUMA node -1 is not one of the node's"],
    "refused": [{"client": 7, "error": "GPU 0000:18:00.0: clients disagree"}]
  })");
}

std::string Render(const json& topology) {
  std::ostringstream out;
  PrintTopology(out, topology);
  return out.str();
}

/// The whitespace-separated words of the line of `text` starting (after indentation) with `label`.
std::vector<std::string> Words(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(' ');
    if (first == std::string::npos || line.compare(first, label.size(), label) != 0) continue;
    std::istringstream words(line);
    std::vector<std::string> out;
    for (std::string w; words >> w;) out.push_back(w);
    return out;
  }
  return {};
}

TEST(CtlTopologyViewTest, ShowsEachPlaceWithItsCapacityInGibAndPeers) {
  const std::string text = Render(Topology());
  EXPECT_EQ(Words(text, "0 "), (std::vector<std::string>{"0", "gpu", "0000:18:00.0", "gpu", "140.4",
                                                         "0", "0000:19:00.0"}))
      << text;
  EXPECT_EQ(Words(text, "2 "), (std::vector<std::string>{"2", "numa0", "numa", "1024.0", "0", "-"}))
      << text;
}

TEST(CtlTopologyViewTest, ShowsEachLinkWithTheBandwidthEachWay) {
  const std::string text = Render(Topology());
  EXPECT_EQ(Words(text, "gpu 0000:18:00.0  numa0"),
            (std::vector<std::string>{"gpu", "0000:18:00.0", "numa0", "46.8", "54.8", "1.0"}))
      << text;
  EXPECT_EQ(Words(text, "gpu 0000:18:00.0  gpu"),
            (std::vector<std::string>{"gpu", "0000:18:00.0", "gpu", "0000:19:00.0", "370.0", "0.0",
                                      "1.0"}))
      << text;
}

TEST(CtlTopologyViewTest, ShowsHopsByPlaceNumberAndMarksUnreachablePairs) {
  const std::string text = Render(Topology());
  const std::string hops = text.substr(text.find("hops:"));
  // Row 0 of the hop table: itself ".", to 1 one hop, to 2 not sent ("-").
  EXPECT_EQ(Words(hops, "0 "), (std::vector<std::string>{"0", ".", "1", "-"})) << hops;
  EXPECT_EQ(Words(hops, "2 "), (std::vector<std::string>{"2", "-", "x", "."})) << hops;
  const std::string bw = text.substr(text.find("bottleneck bandwidth"));
  EXPECT_EQ(Words(bw, "1 "), (std::vector<std::string>{"1", "46.8", ".", "-"})) << bw;
}

TEST(CtlTopologyViewTest, ShowsProvenanceWarningsAndClientsLeftOut) {
  const std::string text = Render(Topology());
  EXPECT_EQ(Words(text, "numa "), (std::vector<std::string>{"numa", "yaml"})) << text;
  EXPECT_EQ(Words(text, "client 7:").size(), 6u) << text;
  EXPECT_EQ(Words(text, "GPU 0000:19:00.0:").front(), "GPU") << text;
}

TEST(CtlTopologyViewTest, PrintsDashesForFieldsTheDaemonDidNotSend) {
  const std::string text = Render(json::parse(R"({"places": [{"place": 0}]})"));
  EXPECT_EQ(Words(text, "0 "), (std::vector<std::string>{"0", "-", "-", "-", "-", "-"})) << text;
}

}  // namespace
}  // namespace chameleon::ctl
