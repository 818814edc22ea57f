// BuildNode: the node's places and links from the merged GPU reports, the NUMA nodes, and the
// figures (override, NVML, defaults), in that order of trust.
#include "chameleon/topology/node.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

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
  if (!s.use_nvml || node.gpus.empty()) {
    links.status = s.use_nvml ? "not used (no GPUs)" : "not used";
    return links;
  }
  if (s.nvml_links != nullptr) return *s.nvml_links;
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

// --- GPU reports merged by bus id (node_gpus.h; here, not in a unit of its own, because it
// reads node.h's GpuReport and node.cc uses it: two units would include each other) ---

namespace {

// Parses `digits` hex digits at `*s`, advancing it; false when fewer are there.
bool Hex(std::string_view* s, std::size_t digits, unsigned long* value) {
  if (s->size() < digits) return false;
  unsigned long v = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>((*s)[i])));
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    v = v * 16 + static_cast<unsigned long>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  s->remove_prefix(digits);
  *value = v;
  return true;
}

bool Separator(std::string_view* s, char c) {
  if (s->empty() || s->front() != c) return false;
  s->remove_prefix(1);
  return true;
}

}  // namespace

std::string NormalizePciBusId(std::string_view text, std::string* out) {
  std::string_view s = text;
  unsigned long domain = 0, bus = 0, device = 0, function = 0;
  // CUDA writes a 4-digit domain, NVML's legacy busId an 8-digit one: both name one device.
  const std::size_t domain_digits = s.find(':') == 8 ? 8 : 4;
  const bool ok = Hex(&s, domain_digits, &domain) && Separator(&s, ':') && Hex(&s, 2, &bus) &&
                  Separator(&s, ':') && Hex(&s, 2, &device) && Separator(&s, '.') &&
                  Hex(&s, 1, &function) && s.empty();
  if (!ok || domain > 0xffff || device > 0x1f || function > 7)
    return "PCI bus id '" + std::string(text.substr(0, 32)) + "' is not dddd:bb:dd.f";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04lx:%02lx:%02lx.%lx", domain, bus, device, function);
  *out = buf;
  return "";
}

namespace detail {
namespace {

std::string Disagree(const std::string& bus, const char* what, std::uint64_t a, std::uint64_t b) {
  return "GPU " + bus + ": clients disagree on its " + what + " (" + std::to_string(a) + " vs " +
         std::to_string(b) + ")";
}

// Folds one report into the row of its GPU.
std::string Fold(const GpuReport& r, MergedGpu* g) {
  if (r.total_memory == 0 || r.total_memory > kMaxGpuMemory)
    return "GPU " + g->pci_bus_id + ": total memory " + std::to_string(r.total_memory) +
           " is not in 1 B..16 TiB";
  if (r.host_numa_node < -1 || r.host_numa_node >= 64)
    return "GPU " + g->pci_bus_id + ": host NUMA node " + std::to_string(r.host_numa_node) +
           " is not in -1..63";
  if (g->total_memory != 0 && g->total_memory != r.total_memory)
    return Disagree(g->pci_bus_id, "total memory", g->total_memory, r.total_memory);
  g->total_memory = r.total_memory;
  if (r.host_numa_node >= 0 && g->host_numa_node >= 0 && g->host_numa_node != r.host_numa_node)
    return Disagree(g->pci_bus_id, "host NUMA node", static_cast<std::uint64_t>(g->host_numa_node),
                    static_cast<std::uint64_t>(r.host_numa_node));
  if (r.host_numa_node >= 0) g->host_numa_node = r.host_numa_node;
  for (const std::string& p : r.peers) {
    std::string peer;
    if (std::string error = NormalizePciBusId(p, &peer); !error.empty())
      return "GPU " + g->pci_bus_id + " peer: " + error;
    if (peer != g->pci_bus_id) g->peers.push_back(peer);
  }
  return "";
}

}  // namespace

std::string MergeGpuReports(const std::vector<GpuReport>& reports, std::vector<MergedGpu>* out) {
  std::map<std::string, MergedGpu> gpus;  // ordered by bus id: the node's GPU order
  for (const GpuReport& r : reports) {
    std::string bus;
    if (std::string error = NormalizePciBusId(r.pci_bus_id, &bus); !error.empty()) return error;
    MergedGpu& g = gpus[bus];
    g.pci_bus_id = bus;
    if (gpus.size() > kMaxNodeGpus) return "more than 64 GPUs reported";
    if (std::string error = Fold(r, &g); !error.empty()) return error;
  }
  std::vector<MergedGpu> rows;
  for (auto& [bus, g] : gpus) {
    std::sort(g.peers.begin(), g.peers.end());
    g.peers.erase(std::unique(g.peers.begin(), g.peers.end()), g.peers.end());
    // A peer no client reported is not a place of this node (yet): nothing can be put there.
    std::erase_if(g.peers, [&](const std::string& p) { return !gpus.count(p); });
    rows.push_back(std::move(g));
  }
  *out = std::move(rows);
  return "";
}

}  // namespace detail
}  // namespace chameleon::topology
