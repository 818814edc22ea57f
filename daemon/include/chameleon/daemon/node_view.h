// NodeView: the daemon's current picture of the node (topology/node.h), rebuilt whenever a client
// connects or leaves from every connected client's HELLO device facts, sysfs, NVML and the
// CHAMELEON_TOPOLOGY override. A client whose facts contradict the others' (or are malformed) is
// left out of the picture and named, never refused: it still gets the single-process service.
// Loop thread only (not thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/topology/node.h"

namespace chameleon::daemon {

/// One client's HELLO rows as node reports: peer bits (this client's ordinals) turned into the
/// bus ids of the devices it listed; a bit naming no listed device is dropped.
std::vector<topology::GpuReport> GpuReportsFromHello(std::span<const ipc::DeviceFacts> devices);

/// The host link of one GPU as the swap planner needs it: bytes/s per direction between the GPU
/// and its own NUMA node.
struct HostLinkFigures {
  double device_to_host = 0;
  double host_to_device = 0;
};
/// The host link of the GPU with bus id `pci_bus_id` in `node`, when the node's figures come from
/// a source (the override, which `chameleon-probe` writes from measurements) rather than the
/// topology's built-in defaults; std::nullopt otherwise, and for a GPU the node does not hold. The
/// daemon's own `host_bandwidth_bytes_per_s` stays in force then: an operator's setting is not
/// replaced by a guess.
std::optional<HostLinkFigures> HostLinkOf(const topology::Node& node, std::string_view pci_bus_id);

class NodeView {
 public:
  /// `base`: where sysfs, NVML and the override are; its `gpus` are ignored. A bad override is
  /// dropped with a warning (the node is then built from the other sources).
  explicit NodeView(topology::NodeSources base = {});
  /// The daemon's sources: CHAMELEON_TOPOLOGY (a path) as the override, real sysfs and NVML.
  static NodeView FromEnvironment();

  /// Adds (or replaces) client `id`'s devices and rebuilds. Returns "" or why its facts were
  /// left out (the node is then built without them).
  std::string AddClient(std::uint32_t id, std::span<const ipc::DeviceFacts> devices);
  /// Drops client `id`'s devices (a GPU another client reports stays) and rebuilds.
  void RemoveClient(std::uint32_t id);

  const topology::Node& node() const { return node_; }
  /// Times the node was rebuilt; it changes whenever node() may have.
  std::uint64_t generation() const { return generation_; }
  /// Clients whose facts were left out, with the reason.
  const std::map<std::uint32_t, std::string>& refused() const { return refused_; }
  /// Problems of the view's own sources (an override that could not be used), one line each.
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// The override's path, "" when none ("CHAMELEON_TOPOLOGY" for reports).
  const std::string& override_path() const { return override_path_; }

 private:
  std::string Rebuild();
  void RefreshNvml(const std::vector<topology::GpuReport>& reports);

  topology::NodeSources base_;
  std::map<std::uint32_t, std::vector<topology::GpuReport>> reports_;
  std::map<std::uint32_t, std::string> refused_;
  std::vector<std::string> warnings_;
  std::string override_path_;
  // NVML is slow to initialise (a driver round trip): read once per set of GPUs seen.
  std::optional<topology::NvmlLinks> nvml_;
  std::vector<std::string> nvml_gpus_;  ///< sorted bus ids nvml_ was read for
  topology::Node node_;
  std::uint64_t generation_ = 0;
};

}  // namespace chameleon::daemon
