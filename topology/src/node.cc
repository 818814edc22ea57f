// BuildNode: the node's places and links from the merged GPU reports, the NUMA nodes, and the
// figures (override, NVML, defaults), in that order of trust.
#include "chameleon/topology/node.h"

#include <algorithm>

#include "chameleon/topology/host_memory.h"
#include "chameleon/topology/nvml_links.h"
#include "node_figures.h"
#include "node_gpus.h"
#include "node_sysfs.h"

namespace chameleon::topology {
namespace {

// The NUMA nodes with their memory and distances: the override's host_numa_bytes, else sysfs,
// else this machine's RAM as one node (with a warning).
void BuildNuma(const NodeSources& s, const detail::NodeFigures& f, Node* node) {
  std::vector<std::uint64_t> bytes = f.host_numa_bytes;
  std::vector<std::vector<int>> distances;
  if (!bytes.empty()) {
    // The override describes a machine sysfs may not be (a simulated node): its distances too.
    node->provenance.numa = "yaml";
    distances = detail::DefaultNumaDistances(bytes.size());
  } else {
    HostMemoryOptions o;
    o.sysfs_node_root = s.sysfs_node_root;
    HostMemory h = ReadHostMemory(o);
    if (!h.warning.empty()) node->warnings.push_back(h.warning);
    bytes = std::move(h.numa_bytes);
    node->provenance.numa = HostMemorySourceName(h.source);
    const std::string error =
        h.source == HostMemorySource::kSysfs
            ? detail::ReadNumaDistances(s.sysfs_node_root, bytes.size(), &distances)
            : "";
    if (!error.empty()) node->warnings.push_back(error + ": assuming distance 21 between nodes");
    if (distances.empty()) distances = detail::DefaultNumaDistances(bytes.size());
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    node->numa.push_back(NodeNuma{static_cast<int>(i), -1, bytes[i], distances[i]});
  }
}

// Each GPU's NUMA node: its report, else sysfs's PCI entry, else node 0 with a warning.
void BuildGpus(const NodeSources& s, std::vector<detail::MergedGpu> merged, Node* node) {
  int from_sysfs = 0, defaulted = 0;
  for (detail::MergedGpu& g : merged) {
    int numa = g.host_numa_node;
    if (numa < 0 && (numa = detail::ReadPciNumaNode(s.sysfs_pci_root, g.pci_bus_id)) >= 0)
      ++from_sysfs;
    if (numa < 0 || node->NumaIndex(numa) < 0) {
      node->warnings.push_back("GPU " + g.pci_bus_id + ": NUMA node " + std::to_string(numa) +
                               " is not one of the node's; attached to NUMA node 0");
      numa = 0;
      ++defaulted;
    }
    node->gpus.push_back(NodeGpu{g.pci_bus_id, -1, numa, g.total_memory, std::move(g.peers)});
  }
  node->provenance.gpus = node->gpus.empty() ? "none" : "hello";
  node->provenance.gpu_numa = defaulted ? "default" : from_sysfs ? "hello+sysfs" : "hello";
}

// NVLink facts when NVML loads; the override's peer figure wins over them, as over defaults.
NvmlLinks ReadNvml(const NodeSources& s, const Node& node) {
  NvmlLinks links;
  if (!s.use_nvml) {
    links.status = "not used";
    return links;
  }
  std::vector<std::string> bus_ids;
  for (const NodeGpu& g : node.gpus) bus_ids.push_back(g.pci_bus_id);
  return ReadNvmlLinks(s.nvml_library, bus_ids);
}

// Bytes/s of the P2P link a -> b: the override's figure, else NVML's NVLink figure, else (no
// NVLink, so P2P over PCIe) the default.
double PeerBandwidth(const detail::NodeFigures& f, const NvmlLinks& nvml, const std::string& a,
                     const std::string& b) {
  if (f.has_peer) return f.peer;
  const double nvlink = nvml.loaded ? NvLinkBandwidth(nvml, a, b) : 0;
  return nvlink > 0 ? nvlink : f.peer;
}

void Provenance(const detail::NodeFigures& f, const NvmlLinks& nvml, NodeProvenance* p) {
  p->host_link = f.has_host_link ? "yaml" : "defaults";
  p->peer_link = f.has_peer ? "yaml" : nvml.loaded ? "nvml" : "defaults";
  p->nvml = nvml.status;
  p->numa_link = f.has_numa_link ? "yaml" : "defaults";
  p->links = "host " + p->host_link + ", peer " + p->peer_link + ", numa " + p->numa_link;
}

// Places (GPUs, then NUMA nodes) and links: GPU <-> own NUMA node at the host-link figures per
// direction, GPU -> peer where P2P says so, NUMA <-> NUMA directly (sysfs distances are
// point-to-point; latency scaled by distance / 10).
void BuildTopology(const detail::NodeFigures& f, const NvmlLinks& nvml, Node* node) {
  Topology& t = node->topology;
  for (NodeGpu& g : node->gpus)
    g.place = t.AddPlace(Place{"gpu " + g.pci_bus_id, PlaceKind::kGpu, g.capacity, 0});
  for (NodeNuma& n : node->numa)
    n.place = t.AddPlace(Place{"numa" + std::to_string(n.id), PlaceKind::kNumaNode, n.capacity, 0});
  for (const NodeGpu& g : node->gpus) {
    const int numa = node->numa[static_cast<std::size_t>(node->NumaIndex(g.host_numa_node))].place;
    t.AddLink(g.place, numa, f.device_to_host, f.latency);
    t.AddLink(numa, g.place, f.host_to_device, f.latency);
    for (const std::string& peer : g.peers)
      t.AddLink(g.place, node->gpus[static_cast<std::size_t>(node->GpuIndex(peer))].place,
                PeerBandwidth(f, nvml, g.pci_bus_id, peer), f.latency);
  }
  for (std::size_t a = 0; a < node->numa.size(); ++a) {
    for (std::size_t b = a + 1; b < node->numa.size(); ++b) {
      const double scale = node->numa[a].distances[b] / 10.0;
      t.AddDuplex(node->numa[a].place, node->numa[b].place, f.numa_link, f.latency * scale);
    }
  }
  t.Finalize();
}

}  // namespace

int Node::GpuIndex(std::string_view pci_bus_id) const {
  const auto it =
      std::lower_bound(gpus.begin(), gpus.end(), pci_bus_id,
                       [](const NodeGpu& g, std::string_view bus) { return g.pci_bus_id < bus; });
  return it != gpus.end() && it->pci_bus_id == pci_bus_id ? static_cast<int>(it - gpus.begin())
                                                          : -1;
}

int Node::NumaIndex(int id) const {
  for (std::size_t i = 0; i < numa.size(); ++i)
    if (numa[i].id == id) return static_cast<int>(i);
  return -1;
}

std::string BuildNode(const NodeSources& sources, Node* out) {
  detail::NodeFigures figures;
  if (std::string error = detail::ParseNodeFigures(sources.override_yaml, &figures); !error.empty())
    return "CHAMELEON_TOPOLOGY: " + error;
  std::vector<detail::MergedGpu> merged;
  if (std::string error = detail::MergeGpuReports(sources.gpus, &merged); !error.empty())
    return error;
  Node node;
  BuildNuma(sources, figures, &node);
  BuildGpus(sources, std::move(merged), &node);
  const NvmlLinks nvml = ReadNvml(sources, node);
  node.warnings.insert(node.warnings.end(), nvml.warnings.begin(), nvml.warnings.end());
  Provenance(figures, nvml, &node.provenance);
  BuildTopology(figures, nvml, &node);
  *out = std::move(node);
  return "";
}

}  // namespace chameleon::topology
