// Facts about the visible devices, read in-process through the real driver for HELLO (the daemon
// never opens GPUs). Slow path; called from the client thread or the first connection attempt.
#pragma once

#include <vector>

#include "chameleon/ipc/socket_protocol.h"
#include "real_driver.h"

namespace chameleon::shim {

/// One entry per device the driver reports (at most ipc::kMaxDevices). Facts the driver cannot
/// give are left at their "unknown" values (host_numa_node -1, empty bus id).
std::vector<ipc::DeviceFacts> GatherDeviceFacts(const DriverAux& aux);

}  // namespace chameleon::shim
