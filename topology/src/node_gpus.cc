#include "node_gpus.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

namespace chameleon::topology {
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
