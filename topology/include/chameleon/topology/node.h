// A training node as placement sees it: its GPUs and host NUMA nodes as places of a Topology
// (links with per-direction bandwidth), plus the facts that identify one GPU across processes.
//
// Built by the daemon from what it may know without opening a GPU (issue 16 item 1): the device
// facts each shim reports in HELLO, sysfs (/sys/devices/system/node: memory, distances), NVML when
// `libnvidia-ml.so.1` loads at run time, and a YAML override in the schema SIMGPU_TOPOLOGY shares.
// GPUs are keyed by PCI bus id, never by ordinal: CUDA_VISIBLE_DEVICES gives every process its
// own ordinals. Plain value types; BuildNode depends only on its inputs and the files and library
// they name, and is thread-safe as far as NVML is (docs/topology.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chameleon/topology/nvml_links.h"
#include "chameleon/topology/topology.h"

namespace chameleon::topology {

/// One GPU as one client saw it (a HELLO DeviceFacts row, translated).
struct GpuReport {
  std::string pci_bus_id;   ///< "0000:18:00.0", lower-case: the node-wide identity
  int ordinal = 0;          ///< this client's ordinal for it
  int host_numa_node = -1;  ///< -1 unknown
  std::uint64_t total_memory = 0;
  std::vector<std::string> peers;  ///< bus ids of the GPUs it can access directly (P2P)
};

/// Where node facts come from; every field optional. Tests inject all of them.
struct NodeSources {
  std::vector<GpuReport> gpus;  ///< from every connected client (duplicates agree or error)
  std::string sysfs_node_root = "/sys/devices/system/node";
  /// Holds <bus id>/numa_node: a GPU's NUMA node when its driver does not report one.
  std::string sysfs_pci_root = "/sys/bus/pci/devices";
  bool use_nvml = true;  ///< dlopen `nvml_library` for NVLink state if present
  std::string nvml_library = "libnvidia-ml.so.1";  ///< tests load a fake one
  /// When set (and use_nvml), these NVLink facts instead of loading NVML: the daemon reads NVML
  /// once per set of GPUs, not at every client's arrival.
  const NvmlLinks* nvml_links = nullptr;
  /// CHAMELEON_TOPOLOGY text ("" = none): overrides the link figures (host_to_device_bandwidth,
  /// device_to_host_bandwidth, host_link_bandwidth, peer_link_bandwidth, numa_link_bandwidth,
  /// copy_latency_ns) and the host memory (host_numa_bytes). GPU identities, capacities and P2P
  /// reachability always come from the reports: they are what the processes actually see.
  std::string override_yaml;
};

/// Role of a place of the node's topology.
struct NodeGpu {
  std::string pci_bus_id;
  int place = -1;           ///< index in Node::topology
  int host_numa_node = -1;  ///< always a NUMA node of Node::numa (0 when no source said)
  std::uint64_t capacity = 0;
  std::vector<std::string> peers;  ///< bus ids it has a direct link to, sorted
};
struct NodeNuma {
  int id = 0;      ///< NUMA node id as the OS numbers it
  int place = -1;  ///< index in Node::topology
  std::uint64_t capacity = 0;
  std::vector<int> distances;  ///< SLIT distance to each NUMA node by index (10 = itself)
};

/// Where each figure of the node came from, for `chameleonctl topology`.
struct NodeProvenance {
  std::string gpus;       ///< "hello" (none connected: "none")
  std::string gpu_numa;   ///< "hello", "hello+sysfs" (some from /sys/bus/pci), "default"
  std::string numa;       ///< "sysfs", "yaml", "physical RAM"
  std::string host_link;  ///< "yaml", "defaults"
  std::string peer_link;  ///< "yaml", "nvml", "defaults" (reachability is always "hello")
  std::string numa_link;  ///< "yaml", "defaults"
  std::string links;      ///< the three above in one line: "host yaml, peer nvml, numa defaults"
  std::string nvml;       ///< "loaded", "not used", or why it did not load
};

struct Node {
  Topology topology;           ///< finalised; places = gpus then NUMA nodes
  std::vector<NodeGpu> gpus;   ///< sorted by pci_bus_id
  std::vector<NodeNuma> numa;  ///< sorted by id
  NodeProvenance provenance;
  std::vector<std::string> warnings;  ///< sources that were set but unusable, one line each

  /// Index into `gpus`, or -1.
  int GpuIndex(std::string_view pci_bus_id) const;
  /// Index into `numa` of NUMA node `id`, or -1.
  int NumaIndex(int id) const;
};

/// Writes the canonical form of a PCI bus id ("0000:18:00.0", lower-case; an 8-digit NVML
/// domain shortened) to `out`. Returns "" or a one-line reason.
std::string NormalizePciBusId(std::string_view text, std::string* out);

/// Builds the node. Returns "" on success; else one line naming the conflicting or malformed
/// source (two clients disagreeing on a GPU's memory, a bad override), `out` then unusable.
std::string BuildNode(const NodeSources& sources, Node* out);

}  // namespace chameleon::topology
