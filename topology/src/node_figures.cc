#include "node_figures.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <exception>

#include "chameleon/topology/host_memory.h"

namespace chameleon::topology::detail {
namespace {

// One bandwidth key: absent leaves `*out`; present must be a finite number in (0, kMaxBandwidth].
std::string Bandwidth(const YAML::Node& root, const char* key, double* out, bool* seen) {
  if (!root[key]) return "";
  double v = 0;
  try {
    v = root[key].as<double>();
  } catch (const std::exception&) {
    return std::string(key) + ": expected a number of bytes/s";
  }
  if (!std::isfinite(v) || v <= 0 || v > kMaxBandwidth)
    return std::string(key) + ": must be in (0, 1e13] bytes/s";
  *out = v;
  *seen = true;
  return "";
}

std::string Latency(const YAML::Node& root, NodeFigures* out) {
  if (!root["copy_latency_ns"]) return "";
  double ns = 0;
  try {
    ns = root["copy_latency_ns"].as<double>();
  } catch (const std::exception&) {
    return "copy_latency_ns: expected a number";
  }
  // A second per copy is no link a placement could use; it is a unit mistake.
  if (!std::isfinite(ns) || ns < 0 || ns > 1e9) return "copy_latency_ns: must be in [0, 1e9]";
  out->latency = ns * 1e-9;
  return "";
}

// host_numa_bytes by the shim's and simgpu's own strict reader, so all three agree on a file.
std::string HostNuma(const std::string& text, NodeFigures* out) {
  bool present = false;
  std::vector<std::uint64_t> nodes;
  if (std::string error = ParseHostNumaBytes(text, &nodes, &present); !error.empty()) return error;
  if (present) out->host_numa_bytes = std::move(nodes);
  return "";
}

std::string Apply(const YAML::Node& root, const std::string& text, NodeFigures* f) {
  bool seen = false;
  double both = 0;
  std::string e = Bandwidth(root, "host_link_bandwidth", &both, &f->has_host_link);
  if (e.empty() && f->has_host_link) f->host_to_device = f->device_to_host = both;
  // The one-way keys win over host_link_bandwidth, as in simgpu's reader.
  if (e.empty()) e = Bandwidth(root, "host_to_device_bandwidth", &f->host_to_device, &seen);
  if (e.empty()) e = Bandwidth(root, "device_to_host_bandwidth", &f->device_to_host, &seen);
  f->has_host_link = f->has_host_link || seen;
  if (e.empty()) e = Bandwidth(root, "peer_link_bandwidth", &f->peer, &f->has_peer);
  if (e.empty()) e = Bandwidth(root, "numa_link_bandwidth", &f->numa_link, &f->has_numa_link);
  if (e.empty()) e = Latency(root, f);
  if (e.empty()) e = HostNuma(text, f);
  return e;
}

}  // namespace

std::string ParseNodeFigures(const std::string& yaml_text, NodeFigures* out) {
  NodeFigures f;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const std::exception& e) {
    return std::string("not YAML: ") + e.what();
  }
  if (root.IsNull()) {
    *out = f;
    return "";
  }
  if (!root.IsMap()) return "the top level must be a map of machine keys";
  if (std::string error = Apply(root, yaml_text, &f); !error.empty()) return error;
  *out = std::move(f);
  return "";
}

}  // namespace chameleon::topology::detail
