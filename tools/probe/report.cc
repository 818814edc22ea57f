#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace chameleon::probe {
namespace {

std::string Printf(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

double Gbps(double bytes_per_s) { return bytes_per_s * 1e-9; }

// Each measured device's figure against its own NUMA node (the first row for it otherwise).
std::vector<const HostLinkFigure*> LocalRows(const ProbeFigures& f) {
  std::vector<const HostLinkFigure*> rows;
  for (int d : f.devices) {
    const HostLinkFigure* pick = nullptr;
    for (const auto& h : f.host) {
      if (h.device != d) continue;
      if (pick == nullptr) pick = &h;
      if (h.numa_node == f.numa_of_device[static_cast<std::size_t>(d)]) pick = &h;
    }
    if (pick != nullptr) rows.push_back(pick);
  }
  return rows;
}

double MedianOf(const std::vector<const HostLinkFigure*>& rows, double HostLinkFigure::*field) {
  std::vector<double> v;
  v.reserve(rows.size());
  for (const auto* r : rows) v.push_back(r->*field);
  return SpreadOf(v).median;
}

}  // namespace

std::string FormatTable(const ProbeFigures& f) {
  std::string out = Printf("chameleon-probe: %s, %d device(s); %llu-byte copies, %d trials\n",
                           f.device_name.c_str(), f.device_count,
                           static_cast<unsigned long long>(f.bytes), f.trials);
  out += "host link (pinned host memory, CUDA event time, median)\n";
  out +=
      Printf("  %-7s %-5s %-14s %12s %12s\n", "device", "numa", "binding", "H2D GB/s", "D2H GB/s");
  for (const auto& h : f.host) {
    const std::string node = h.numa_node < 0 ? "-" : std::to_string(h.numa_node);
    out += Printf("  %-7d %-5s %-14s %12.2f %12.2f\n", h.device, node.c_str(),
                  BindingName(h.binding), Gbps(h.host_to_device), Gbps(h.device_to_host));
  }
  if (!f.peer.empty()) {
    out += "peer copies (cuMemcpyPeerAsync, CUDA event time, median)\n";
    out += Printf("  %-5s %-5s %-12s %12s\n", "from", "to", "path", "GB/s");
    for (const auto& p : f.peer)
      out += Printf("  %-5d %-5d %-12s %12.2f\n", p.from, p.to, p.peer_access ? "peer" : "via host",
                    Gbps(p.bandwidth));
  }
  out += Printf("VMM calls (wall clock, %zu-byte chunk on device %d)\n", f.vmm_chunk_bytes,
                f.devices.front());
  out += Printf("  %-16s %12s %12s\n", "call", "median us", "p99 us");
  for (const auto& v : f.vmm)
    out += Printf("  %-16s %12.2f %12.2f\n", v.call.c_str(), v.micros.median, v.micros.p99);
  return out;
}

std::string FormatYaml(const ProbeFigures& f) {
  const auto rows = LocalRows(f);
  const double h2d = MedianOf(rows, &HostLinkFigure::host_to_device);
  const double d2h = MedianOf(rows, &HostLinkFigure::device_to_host);
  std::string out = Printf(
      "# SIMGPU_TOPOLOGY from chameleon-probe: %s, %d device(s), %llu-byte "
      "copies, %d trials (docs/simgpu.md)\n",
      f.device_name.c_str(), f.device_count, static_cast<unsigned long long>(f.bytes), f.trials);
  const bool numa_known =
      std::none_of(f.numa_of_device.begin(), f.numa_of_device.end(), [](int n) { return n < 0; });
  if (numa_known) {
    out += "numa_nodes: [";
    for (std::size_t i = 0; i < f.numa_of_device.size(); ++i)
      out += (i ? ", " : "") + std::to_string(f.numa_of_device[i]);
    out += "]\n";
  }
  out += Printf("host_to_device_bandwidth: %.6e\n", h2d);
  out += Printf("device_to_host_bandwidth: %.6e\n", d2h);
  out += Printf("host_link_bandwidth: %.6e   # min of the two directions\n", std::min(h2d, d2h));
  if (f.devices.size() > 1) {
    out += "# only the measured devices' pairs; an absent pair has no peer link\n";
    out += "peer_links:";
    std::string links;
    for (const auto& p : f.peer)
      if (p.peer_access)
        links += Printf("\n  - {from: %d, to: %d, bandwidth: %.6e, bidirectional: false}", p.from,
                        p.to, p.bandwidth);
    out += links.empty() ? " []\n" : links + "\n";
  }
  for (const auto& v : f.vmm)
    out += Printf("# %s: median %.2f us, p99 %.2f us (wall clock)\n", v.call.c_str(),
                  v.micros.median, v.micros.p99);
  return out;
}

}  // namespace chameleon::probe
