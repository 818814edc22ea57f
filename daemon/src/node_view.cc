#include "chameleon/daemon/node_view.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace chameleon::daemon {
namespace {

// A machine description is a few dozen lines; anything near this is not one.
constexpr std::streamsize kMaxOverrideBytes = 1 << 20;

std::string BusId(const ipc::DeviceFacts& d) {
  return std::string(d.pci_bus_id, strnlen(d.pci_bus_id, sizeof(d.pci_bus_id)));
}

std::string ReadOverride(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return "CHAMELEON_TOPOLOGY " + path + ": cannot read the file";
  std::string buf(static_cast<std::size_t>(kMaxOverrideBytes) + 1, '\0');
  in.read(buf.data(), kMaxOverrideBytes + 1);
  if (in.gcount() > kMaxOverrideBytes) return "CHAMELEON_TOPOLOGY " + path + ": larger than 1 MiB";
  buf.resize(static_cast<std::size_t>(in.gcount()));
  *text = std::move(buf);
  return "";
}

}  // namespace

std::optional<HostLinkFigures> HostLinkOf(const topology::Node& node, std::string_view pci_bus_id) {
  if (node.provenance.host_link != "yaml") return std::nullopt;
  const int gpu = node.GpuIndex(pci_bus_id);
  if (gpu < 0) return std::nullopt;
  const topology::NodeGpu& g = node.gpus[static_cast<std::size_t>(gpu)];
  const int numa = node.NumaIndex(g.host_numa_node);
  if (numa < 0) return std::nullopt;
  const int host = node.numa[static_cast<std::size_t>(numa)].place;
  HostLinkFigures f{node.topology.Bandwidth(g.place, host), node.topology.Bandwidth(host, g.place)};
  if (!(f.device_to_host > 0) || !(f.host_to_device > 0)) return std::nullopt;
  return f;
}

std::vector<topology::GpuReport> GpuReportsFromHello(std::span<const ipc::DeviceFacts> devices) {
  std::vector<topology::GpuReport> reports;
  for (const ipc::DeviceFacts& d : devices) {
    topology::GpuReport r{BusId(d), d.ordinal, d.host_numa_node, d.total_memory, {}};
    for (const ipc::DeviceFacts& peer : devices) {
      const bool bit = peer.ordinal >= 0 && peer.ordinal < 64 &&
                       (d.peer_mask >> static_cast<unsigned>(peer.ordinal) & 1u) != 0;
      if (bit && peer.ordinal != d.ordinal) r.peers.push_back(BusId(peer));
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

NodeView::NodeView(topology::NodeSources base) : base_(std::move(base)) {
  base_.gpus.clear();
  if (std::string error = Rebuild(); !error.empty()) {
    warnings_.push_back(error + " (the override is ignored)");
    base_.override_yaml.clear();
    Rebuild();
  }
}

NodeView NodeView::FromEnvironment() {
  topology::NodeSources sources;
  std::string problem;
  const char* path = std::getenv("CHAMELEON_TOPOLOGY");
  if (path != nullptr && *path != '\0') problem = ReadOverride(path, &sources.override_yaml);
  NodeView view(std::move(sources));
  if (!problem.empty()) view.warnings_.insert(view.warnings_.begin(), problem);
  if (path != nullptr) view.override_path_ = path;
  return view;
}

std::string NodeView::AddClient(std::uint32_t id, std::span<const ipc::DeviceFacts> devices) {
  reports_[id] = GpuReportsFromHello(devices);
  refused_.erase(id);
  std::string error = Rebuild();
  if (error.empty()) return "";
  // Only this client's facts are new, so without them the node builds as it did before.
  reports_.erase(id);
  refused_[id] = error;
  Rebuild();
  return error;
}

void NodeView::RemoveClient(std::uint32_t id) {
  refused_.erase(id);
  if (reports_.erase(id) != 0) Rebuild();
}

void NodeView::RefreshNvml(const std::vector<topology::GpuReport>& reports) {
  std::vector<std::string> gpus;
  for (const topology::GpuReport& r : reports) {
    std::string bus;
    if (topology::NormalizePciBusId(r.pci_bus_id, &bus).empty()) gpus.push_back(bus);
  }
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  const bool known =
      nvml_ && std::includes(nvml_gpus_.begin(), nvml_gpus_.end(), gpus.begin(), gpus.end());
  if (known || gpus.empty()) return;
  nvml_ = topology::ReadNvmlLinks(base_.nvml_library, gpus);
  nvml_gpus_ = std::move(gpus);
}

std::string NodeView::Rebuild() {
  topology::NodeSources sources = base_;
  for (const auto& [id, reports] : reports_)
    sources.gpus.insert(sources.gpus.end(), reports.begin(), reports.end());
  if (sources.use_nvml) {
    RefreshNvml(sources.gpus);
    sources.nvml_links = nvml_ ? &*nvml_ : nullptr;
  }
  topology::Node node;
  std::string error = topology::BuildNode(sources, &node);
  if (!error.empty()) return error;
  node_ = std::move(node);
  ++generation_;
  return "";
}

}  // namespace chameleon::daemon
