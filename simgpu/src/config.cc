// Environment and SIMGPU_TOPOLOGY parsing. Everything here is untrusted input: validated, never
// thrown out of this file.
#include "config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <exception>

#include "chameleon/ipc/byte_size.h"

namespace chameleon::simgpu {
namespace {

constexpr double kDefaultPeerBandwidth = 250e9;  // NVLink3 (A100), achieved per direction

bool ParseInt(const char* text, long min, long max, long* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

void Resize(Config* c, std::uint64_t memory) {
  const auto n = static_cast<std::size_t>(c->device_count);
  c->memory_bytes.assign(n, memory);
  c->numa_node.assign(n, 0);
  c->peer_bandwidth.assign(n, std::vector<double>(n, kDefaultPeerBandwidth));
  for (std::size_t i = 0; i < n; ++i) c->peer_bandwidth[i][i] = 0;
}

double Positive(const YAML::Node& node, const char* key) {
  double v = node[key].as<double>();
  if (!(v > 0)) throw std::runtime_error(std::string(key) + " must be > 0");
  return v;
}

void ApplyTopology(const YAML::Node& root, Config* c) {
  if (!root.IsMap()) throw std::runtime_error("top level must be a map");
  if (root["host_link_bandwidth"]) c->host_link_bandwidth = Positive(root, "host_link_bandwidth");
  if (root["peak_flops"]) c->peak_flops = Positive(root, "peak_flops");
  if (root["hbm_bandwidth"]) c->hbm_bandwidth = Positive(root, "hbm_bandwidth");
  if (root["peer_link_bandwidth"]) c->peer_link_bandwidth = Positive(root, "peer_link_bandwidth");
  if (root["launch_latency_ns"])
    c->launch_latency_ns = root["launch_latency_ns"].as<std::uint64_t>();
  if (root["copy_latency_ns"]) c->copy_latency_ns = root["copy_latency_ns"].as<std::uint64_t>();
  if (root["host_call_ns"]) c->host_call_ns = root["host_call_ns"].as<std::uint64_t>();
  if (const auto numa = root["numa_nodes"]) {
    if (!numa.IsSequence() || numa.size() != c->numa_node.size())
      throw std::runtime_error("numa_nodes needs one entry per device");
    for (std::size_t i = 0; i < numa.size(); ++i) c->numa_node[i] = numa[i].as<int>();
  }
  if (const auto links = root["peer_links"]) {
    if (!links.IsSequence()) throw std::runtime_error("peer_links must be a list");
    for (auto& row : c->peer_bandwidth) std::fill(row.begin(), row.end(), 0.0);
    for (const auto& l : links) {
      int a = l["from"].as<int>();
      int b = l["to"].as<int>();
      if (a < 0 || b < 0 || a >= c->device_count || b >= c->device_count || a == b)
        throw std::runtime_error("peer_links: bad device pair");
      double bw = Positive(l, "bandwidth");
      c->peer_bandwidth[a][b] = bw;
      if (!l["bidirectional"] || l["bidirectional"].as<bool>()) c->peer_bandwidth[b][a] = bw;
    }
  }
}

}  // namespace

bool ParseSize(std::string_view text, std::uint64_t* out) {
  const ipc::ByteSize size = ipc::ParseByteSize(text);
  if (!size || size.bytes == 0) return false;
  *out = size.bytes;
  return true;
}

std::string LoadConfig(Config* out) {
  Config c;
  std::uint64_t memory = 80 * kGiB;
  std::string error;
  if (const char* d = std::getenv("SIMGPU_DEVICES")) {
    long n = 0;
    if (ParseInt(d, 1, kMaxDevices, &n))
      c.device_count = static_cast<int>(n);
    else
      error = "SIMGPU_DEVICES must be an integer in 1..16";
  }
  if (const char* m = std::getenv("SIMGPU_MEMORY")) {
    if (!ParseSize(m, &memory)) {
      error = std::string("SIMGPU_MEMORY must be a size > 0: ") + ipc::kByteSizeForms;
      memory = 80 * kGiB;
    }
  }
  if (const char* r = std::getenv("SIMGPU_REPORT")) c.report = r[0] == '1';
  Resize(&c, memory);
  if (const char* t = std::getenv("SIMGPU_TOPOLOGY"); t && *t && error.empty()) {
    try {
      ApplyTopology(YAML::LoadFile(t), &c);
    } catch (const std::exception& e) {
      error = std::string("SIMGPU_TOPOLOGY ") + t + ": " + e.what();
    }
  }
  if (!error.empty()) {
    Config defaults;
    Resize(&defaults, 80 * kGiB);
    *out = defaults;
    return error;
  }
  *out = c;
  return "";
}

}  // namespace chameleon::simgpu
