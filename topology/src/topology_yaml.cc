#include "chameleon/topology/topology_yaml.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace chameleon::topology {
namespace {

constexpr double kGiga = 1e9;

double Number(const YAML::Node& node, const char* key, double fallback) {
  return node[key] ? node[key].as<double>() : fallback;
}

WaferSpec ParseWafer(const YAML::Node& w) {
  WaferSpec spec;
  if (w["preset"]) {
    const auto preset = WaferPreset(w["preset"].as<std::string>());
    if (!preset) throw std::runtime_error("wafer.preset: unknown preset");
    spec = *preset;
  }
  spec.name = w["name"] ? w["name"].as<std::string>() : (spec.name.empty() ? "wafer" : spec.name);
  spec.width = w["width"] ? w["width"].as<int>() : spec.width;
  spec.height = w["height"] ? w["height"].as<int>() : spec.height;
  spec.dram_per_die = static_cast<std::uint64_t>(
      Number(w, "dram_per_die_gb", static_cast<double>(spec.dram_per_die) / kGiga) * kGiga);
  spec.d2d_bandwidth = Number(w, "d2d_tb_per_s", spec.d2d_bandwidth / 1e12) * 1e12;
  spec.flops_per_die = Number(w, "tflops_per_die", spec.flops_per_die / 1e12) * 1e12;
  spec.d2d_latency = Number(w, "d2d_latency_ns", spec.d2d_latency * 1e9) * 1e-9;
  if (spec.dram_per_die == 0 || !(spec.d2d_bandwidth > 0)) {
    throw std::runtime_error("wafer: dram_per_die_gb and d2d_tb_per_s must be positive");
  }
  return spec;
}

PlaceKind Kind(const std::string& kind) {
  if (kind == "gpu") return PlaceKind::kGpu;
  if (kind == "numa") return PlaceKind::kNumaNode;
  if (kind == "die") return PlaceKind::kDie;
  return PlaceKind::kOther;
}

Topology ParseGraph(const YAML::Node& root) {
  Topology topo;
  std::map<std::string, int> ids;
  for (const auto& p : root["places"]) {
    if (!p["name"]) throw std::runtime_error("places: every place needs a name");
    const std::string name = p["name"].as<std::string>();
    if (ids.count(name)) throw std::runtime_error("places: duplicate name '" + name + "'");
    ids[name] = topo.AddPlace(Place{name, Kind(p["kind"] ? p["kind"].as<std::string>() : ""),
                                    static_cast<std::uint64_t>(Number(p, "capacity_gb", 0) * kGiga),
                                    Number(p, "tflops", 0) * 1e12});
  }
  for (const auto& l : root["links"]) {
    const auto end = [&](const char* key) {
      const auto it = ids.find(l[key] ? l[key].as<std::string>() : "");
      if (it == ids.end()) throw std::runtime_error(std::string("links: unknown '") + key + "'");
      return it->second;
    };
    const double bw = Number(l, "gb_per_s", 0) * kGiga;
    const double lat = Number(l, "latency_us", 0) * 1e-6;
    if (!(bw > 0)) throw std::runtime_error("links: gb_per_s must be positive");
    if (l["duplex"] && l["duplex"].as<bool>()) {
      topo.AddDuplex(end("from"), end("to"), bw, lat);
    } else {
      topo.AddLink(end("from"), end("to"), bw, lat);
    }
  }
  topo.Finalize();
  return topo;
}

}  // namespace

TopologyDescription ParseTopologyYaml(const std::string& text) {
  try {
    const YAML::Node root = YAML::Load(text);
    if (root["wafer"]) return ParseWafer(root["wafer"]);
    if (root["places"]) return ParseGraph(root);
    throw std::runtime_error("topology YAML needs a 'wafer' or a 'places' key");
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(std::string("topology YAML: ") + e.what());
  }
}

TopologyDescription LoadTopologyYaml(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read topology file " + path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return ParseTopologyYaml(text.str());
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace chameleon::topology
