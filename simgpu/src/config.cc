// Environment, machine presets and SIMGPU_TOPOLOGY parsing. Everything here is untrusted input:
// validated, never thrown out of this file.
//
// Layers, each overriding the one before: the machine preset (SIMGPU_MACHINE), SIMGPU_TOPOLOGY's
// machine keys, then SIMGPU_DEVICES and SIMGPU_MEMORY, then SIMGPU_TOPOLOGY's per-device keys
// (numa_nodes, peer_links), which need the device count.
#include "config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>

#include "chameleon/ipc/byte_size.h"
#include "chameleon/topology/host_memory.h"
#include "machine_presets.h"

namespace chameleon::simgpu {
namespace {

bool ParseInt(const char* text, long min, long max, long* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

double Positive(const YAML::Node& node, const char* key) {
  double v = node[key].as<double>();
  if (!(v > 0)) throw std::runtime_error(std::string(key) + " must be > 0");
  return v;
}

std::uint64_t Size(const YAML::Node& node, const char* key) {
  std::uint64_t v = 0;
  if (!ParseSize(node[key].as<std::string>(), &v))
    throw std::runtime_error(std::string(key) + " must be a size > 0: " + ipc::kByteSizeForms);
  return v;
}

// A throughput given either as an achieved figure (`achieved_key`) or as peak x fraction. A
// layer that gives only one of peak and fraction scales the other from an earlier layer.
struct Throughput {
  const char* achieved_key;
  const char* peak_key;
  const char* fraction_key;
  double* achieved;
  double* peak;
  double* fraction;
};

void ApplyThroughput(const YAML::Node& root, const Throughput& t) {
  const bool direct = static_cast<bool>(root[t.achieved_key]);
  const bool product = root[t.peak_key] || root[t.fraction_key];
  if (direct && product)
    throw std::runtime_error(std::string("give ") + t.achieved_key + " or " + t.peak_key +
                             " with " + t.fraction_key + ", not both");
  if (direct) {
    *t.achieved = Positive(root, t.achieved_key);
    *t.peak = *t.fraction = 0;
    return;
  }
  if (!product) return;
  if (root[t.peak_key]) *t.peak = Positive(root, t.peak_key);
  if (root[t.fraction_key]) {
    *t.fraction = Positive(root, t.fraction_key);
    if (*t.fraction > 1) throw std::runtime_error(std::string(t.fraction_key) + " must be <= 1");
  }
  if (*t.peak == 0 || *t.fraction == 0)
    throw std::runtime_error(std::string(t.peak_key) + " and " + t.fraction_key + " go together");
  *t.achieved = *t.peak * *t.fraction;
}

std::vector<int> NumaList(const YAML::Node& list, const char* key, std::size_t max) {
  if (!list.IsSequence() || list.size() == 0 || list.size() > max)
    throw std::runtime_error(std::string(key) + " must be a list of 1.." + std::to_string(max));
  std::vector<int> v;
  for (const auto& n : list) {
    v.push_back(n.as<int>());
    if (v.back() < 0) throw std::runtime_error(std::string(key) + ": NUMA ids are >= 0");
  }
  return v;
}

// host_numa_bytes is read by the product's own reader (topology/host_memory.h, which the shim and
// daemon use on CHAMELEON_TOPOLOGY), so both read the same file the same way. yaml-cpp still
// parses the document: a form the strict reader does not accept is an error, not a silent skip.
void ApplyHostNuma(const YAML::Node& root, const std::string& text, Config* c) {
  if (!root["host_numa_bytes"]) return;
  bool present = false;
  std::vector<std::uint64_t> nodes;
  const std::string error = topology::ParseHostNumaBytes(text, &nodes, &present);
  if (!error.empty()) throw std::runtime_error(error);
  if (!present || !root["host_numa_bytes"].IsSequence() ||
      root["host_numa_bytes"].size() != nodes.size())
    throw std::runtime_error("host_numa_bytes: write it as [size, ...] or as a block list");
  c->host_numa_bytes = std::move(nodes);
}

void ApplyMachineKeys(const YAML::Node& root, const std::string& text, Config* c) {
  if (!root.IsMap()) throw std::runtime_error("top level must be a map");
  if (root["machine"]) c->machine = root["machine"].as<std::string>();
  if (root["gpus_per_node"]) {
    c->gpus_per_node = root["gpus_per_node"].as<int>();
    if (c->gpus_per_node < 1 || c->gpus_per_node > kMaxDevices)
      throw std::runtime_error("gpus_per_node must be in 1..16");
  }
  if (root["device_memory"]) c->device_memory = Size(root, "device_memory");
  if (root["host_link_bandwidth"]) {
    c->host_to_device_bandwidth = c->device_to_host_bandwidth =
        Positive(root, "host_link_bandwidth");
  }
  if (root["host_to_device_bandwidth"])
    c->host_to_device_bandwidth = Positive(root, "host_to_device_bandwidth");
  if (root["device_to_host_bandwidth"])
    c->device_to_host_bandwidth = Positive(root, "device_to_host_bandwidth");
  if (root["peer_link_bandwidth"]) c->peer_link_bandwidth = Positive(root, "peer_link_bandwidth");
  if (root["numa_link_bandwidth"]) c->numa_link_bandwidth = Positive(root, "numa_link_bandwidth");
  ApplyThroughput(root, {"peak_flops", "bf16_dense_peak_flops", "gemm_achieved_fraction",
                         &c->peak_flops, &c->gemm_peak_flops, &c->gemm_fraction});
  ApplyThroughput(root, {"hbm_bandwidth", "hbm_peak_bandwidth", "hbm_achieved_fraction",
                         &c->hbm_bandwidth, &c->hbm_peak_bandwidth, &c->hbm_fraction});
  if (root["launch_latency_ns"])
    c->launch_latency_ns = root["launch_latency_ns"].as<std::uint64_t>();
  if (root["copy_latency_ns"]) c->copy_latency_ns = root["copy_latency_ns"].as<std::uint64_t>();
  if (root["host_call_ns"]) c->host_call_ns = root["host_call_ns"].as<std::uint64_t>();
  if (root["gpu_numa_nodes"])
    c->gpu_numa_nodes = NumaList(root["gpu_numa_nodes"], "gpu_numa_nodes", kMaxDevices);
  ApplyHostNuma(root, text, c);
}

void Resize(Config* c) {
  const auto n = static_cast<std::size_t>(c->device_count);
  c->node_device_count = c->device_count;
  c->node_index.resize(n);
  for (std::size_t i = 0; i < n; ++i) c->node_index[i] = static_cast<int>(i);
  c->memory_bytes.assign(n, c->device_memory);
  c->numa_node.assign(n, 0);
  for (std::size_t i = 0; i < n && !c->gpu_numa_nodes.empty(); ++i)
    c->numa_node[i] = c->gpu_numa_nodes[i % c->gpu_numa_nodes.size()];
  c->peer_bandwidth.assign(n, std::vector<double>(n, c->peer_link_bandwidth));
  for (std::size_t i = 0; i < n; ++i) c->peer_bandwidth[i][i] = 0;
}

void ApplyDeviceKeys(const YAML::Node& root, Config* c) {
  if (const auto numa = root["numa_nodes"]) {
    if (!numa.IsSequence() || numa.size() != c->numa_node.size())
      throw std::runtime_error("numa_nodes needs one entry per device");
    c->numa_node = NumaList(numa, "numa_nodes", kMaxDevices);
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

// Every device's NUMA node must be one the machine declares host memory for.
std::string CheckNuma(const Config& c) {
  for (int node : c.numa_node) {
    if (static_cast<std::size_t>(node) >= c.host_numa_bytes.size())
      return "NUMA node " + std::to_string(node) + " of a device has no host_numa_bytes entry";
  }
  return "";
}

std::string ApplyPreset(Config* c) {
  const char* env = std::getenv("SIMGPU_MACHINE");
  const std::string name = env && *env ? env : std::string(kDefaultMachine);
  const MachinePreset* preset = FindMachinePreset(name);
  if (!preset) return "SIMGPU_MACHINE must be one of " + MachinePresetNames() + ": got " + name;
  try {
    const std::string text(preset->yaml);
    ApplyMachineKeys(YAML::Load(text), text, c);
  } catch (const std::exception& e) {
    return "SIMGPU_MACHINE " + name + " (built-in preset): " + e.what();
  }
  return "";
}

std::string ReadText(const char* path, std::string* text) {
  std::ifstream in(path);
  if (!in) return std::string("SIMGPU_TOPOLOGY ") + path + ": cannot read the file";
  std::stringstream s;
  s << in.rdbuf();
  *text = s.str();
  return "";
}

std::string Load(Config* c) {
  if (std::string error = ApplyPreset(c); !error.empty()) return error;
  if (const char* d = std::getenv("SIMGPU_DEVICES")) {
    long n = 0;
    if (!ParseInt(d, 1, kMaxDevices, &n)) return "SIMGPU_DEVICES must be an integer in 1..16";
    c->device_count = static_cast<int>(n);
  }
  if (const char* r = std::getenv("SIMGPU_REPORT")) c->report = r[0] == '1';
  if (const char* node = std::getenv("SIMGPU_NODE"); node && *node) c->node_name = node;
  const char* t = std::getenv("SIMGPU_TOPOLOGY");
  YAML::Node topology;
  try {
    if (t && *t) {
      std::string text;
      if (std::string error = ReadText(t, &text); !error.empty()) return error;
      topology = YAML::Load(text);
      ApplyMachineKeys(topology, text, c);
    }
    if (const char* m = std::getenv("SIMGPU_MEMORY"); m && !ParseSize(m, &c->device_memory))
      return std::string("SIMGPU_MEMORY must be a size > 0: ") + ipc::kByteSizeForms;
    Resize(c);
    if (t && *t) ApplyDeviceKeys(topology, c);
  } catch (const std::exception& e) {
    return std::string("SIMGPU_TOPOLOGY ") + (t ? t : "") + ": " + e.what();
  }
  if (std::string error = CheckNuma(*c); !error.empty()) {
    return (t && *t ? std::string("SIMGPU_TOPOLOGY ") + t + ": " : "SIMGPU_MACHINE: ") + error;
  }
  return "";
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
  std::string error = Load(&c);
  *out = error.empty() ? c : Config{};
  return error;
}

}  // namespace chameleon::simgpu
