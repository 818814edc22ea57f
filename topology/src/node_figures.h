// The link figures and host memory of a node, and the one reader of them from the machine YAML
// (the SIMGPU_TOPOLOGY schema, simgpu/machines/*.yaml) that CHAMELEON_TOPOLOGY overrides with.
// Internal to topology/; plain value types and pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chameleon::topology::detail {

/// Figures used when neither the override nor NVML gives one. Conservative on purpose: a
/// placement that assumes too fast a link overfills it, one that assumes too slow wastes a little.
inline constexpr double kDefaultHostLinkBandwidth = 2.5e10;  ///< B/s each way: PCIe Gen4 x16,
                                                             ///< achieved (a100-pcie4 preset)
/// P2P without NVLink facts goes over PCIe, so it is as fast as the host link, no faster.
inline constexpr double kDefaultPeerLinkBandwidth = kDefaultHostLinkBandwidth;
/// Inter-socket (UPI / Infinity Fabric) per direction: an assumption below what two-socket
/// servers of the last generations offer, to be overridden by numa_link_bandwidth.
inline constexpr double kDefaultNumaLinkBandwidth = 4.0e10;
inline constexpr double kDefaultLinkLatency = 1e-6;  ///< s, simgpu's copy_latency_ns default
/// Above this a figure is a typo: 10 TB/s per direction is more than 20 NVLink4 GPUs' worth.
inline constexpr double kMaxBandwidth = 1e13;

/// The override's keys; `has_*` false when the key is absent.
struct NodeFigures {
  double host_to_device = kDefaultHostLinkBandwidth;
  double device_to_host = kDefaultHostLinkBandwidth;
  double peer = kDefaultPeerLinkBandwidth;
  double numa_link = kDefaultNumaLinkBandwidth;
  double latency = kDefaultLinkLatency;
  bool has_host_link = false;  ///< any of host_link / host_to_device / device_to_host_bandwidth
  bool has_peer = false;
  bool has_numa_link = false;
  std::vector<std::uint64_t> host_numa_bytes;  ///< empty when the key is absent
};

/// Reads the override text into `out` (defaults kept for absent keys). Returns "" or one line
/// naming the key at fault. An empty text is no override and succeeds.
std::string ParseNodeFigures(const std::string& yaml_text, NodeFigures* out);

}  // namespace chameleon::topology::detail
