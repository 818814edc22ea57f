// One HELLO device row for daemon tests (what a shim reports of a GPU it sees).
#pragma once

#include <cstdint>
#include <cstdio>

#include "chameleon/ipc/socket_protocol.h"

namespace chameleon::daemon {

inline ipc::DeviceFacts MakeDeviceFacts(std::int32_t ordinal, const char* bus_id,
                                        std::uint64_t memory, std::uint64_t peer_mask = 0,
                                        std::int32_t numa = 0) {
  ipc::DeviceFacts device{};
  device.ordinal = ordinal;
  device.host_numa_node = numa;
  device.total_memory = memory;
  device.peer_mask = peer_mask;
  std::snprintf(device.pci_bus_id, sizeof(device.pci_bus_id), "%s", bus_id);
  return device;
}

}  // namespace chameleon::daemon
