// What one client reports about one GPU it sees (a HELLO DeviceFacts row, translated): the input
// of BuildNode (node.h). Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chameleon::topology {

/// One GPU as one client saw it (a HELLO DeviceFacts row, translated).
struct GpuReport {
  std::string pci_bus_id;   ///< "0000:18:00.0", lower-case: the node-wide identity
  int ordinal = 0;          ///< this client's ordinal for it
  int host_numa_node = -1;  ///< -1 unknown
  std::uint64_t total_memory = 0;
  std::vector<std::string> peers;  ///< bus ids of the GPUs it can access directly (P2P)
};

}  // namespace chameleon::topology
