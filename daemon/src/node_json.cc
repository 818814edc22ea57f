#include "chameleon/daemon/node_json.h"

namespace chameleon::daemon {
namespace {

using nlohmann::json;

const char* KindName(topology::PlaceKind kind) {
  switch (kind) {
    case topology::PlaceKind::kGpu:
      return "gpu";
    case topology::PlaceKind::kNumaNode:
      return "numa";
    case topology::PlaceKind::kDie:
      return "die";
    case topology::PlaceKind::kOther:
      break;
  }
  return "other";
}

json Places(const topology::Node& node) {
  json places = json::array();
  for (const topology::NodeGpu& g : node.gpus) {
    places.push_back({{"place", g.place},
                      {"name", node.topology.place(g.place).name},
                      {"kind", "gpu"},
                      {"capacity_bytes", g.capacity},
                      {"pci_bus_id", g.pci_bus_id},
                      {"numa_node", g.host_numa_node},
                      {"peers", g.peers}});
  }
  for (const topology::NodeNuma& n : node.numa) {
    places.push_back({{"place", n.place},
                      {"name", node.topology.place(n.place).name},
                      {"kind", KindName(node.topology.place(n.place).kind)},
                      {"capacity_bytes", n.capacity},
                      {"numa_node", n.id},
                      {"distances", n.distances}});
  }
  return places;
}

// One entry per pair of neighbours, both directions in it (a one-way P2P link shows 0 back).
json Links(const topology::Topology& t) {
  json links = json::array();
  for (const topology::Link& l : t.links()) {
    const int back = t.LinkIndex(l.to, l.from);
    if (back >= 0 && l.to < l.from) continue;  // listed with its reverse already
    const double reverse = back >= 0 ? t.links()[static_cast<std::size_t>(back)].bandwidth : 0;
    links.push_back({{"a", t.place(l.from).name},
                     {"b", t.place(l.to).name},
                     {"a_to_b_bandwidth", l.bandwidth},
                     {"b_to_a_bandwidth", reverse},
                     {"latency_s", l.latency}});
  }
  return links;
}

// Every ordered pair of distinct places; unreachable pairs say so instead of a figure.
json Routes(const topology::Topology& t) {
  json routes = json::array();
  for (int a = 0; a < t.place_count(); ++a) {
    for (int b = 0; b < t.place_count(); ++b) {
      if (a == b) continue;
      json r{{"from", t.place(a).name}, {"to", t.place(b).name}};
      if (t.Hops(a, b) == topology::kUnreachable) {
        r["reachable"] = false;
      } else {
        r["reachable"] = true;
        r["hops"] = t.Hops(a, b);
        r["bandwidth"] = t.Bandwidth(a, b);
        r["seconds_per_byte"] = t.SecondsPerByte(a, b);
      }
      routes.push_back(std::move(r));
    }
  }
  return routes;
}

json Provenance(const NodeView& view) {
  const topology::NodeProvenance& p = view.node().provenance;
  return {{"gpus", p.gpus},           {"gpu_numa", p.gpu_numa},          {"numa", p.numa},
          {"host_link", p.host_link}, {"peer_link", p.peer_link},        {"numa_link", p.numa_link},
          {"nvml", p.nvml},           {"override", view.override_path()}};
}

}  // namespace

nlohmann::json NodeViewToJson(const NodeView& view) {
  const topology::Node& node = view.node();
  json warnings = view.warnings();
  for (const std::string& w : node.warnings) warnings.push_back(w);
  json refused = json::array();
  for (const auto& [id, error] : view.refused())
    refused.push_back({{"client", id}, {"error", error}});
  return {{"generation", view.generation()},
          {"places", Places(node)},
          {"links", Links(node.topology)},
          {"routes", Routes(node.topology)},
          {"provenance", Provenance(view)},
          {"warnings", warnings},
          {"refused", refused}};
}

}  // namespace chameleon::daemon
