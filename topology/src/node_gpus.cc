#include "node_gpus.h"

#include "chameleon/topology/pci_bus_id.h"

#include <algorithm>
#include <map>

namespace chameleon::topology {

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
