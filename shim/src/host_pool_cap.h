// The cap on pinned host memory the swap executor may hold: CHAMELEON_HOST_POOL_BYTES if set,
// else half of the node's host memory as the topology states it (CHAMELEON_TOPOLOGY, sysfs, or
// this machine's RAM with a warning; topology/host_memory.h). Half, because the training program
// and the OS need the rest. Called once when the executor starts, never on the hot path.
// Thread-safe (pure, except for the file reads).
#pragma once

#include <cstdint>
#include <string>

#include "chameleon/topology/host_memory.h"

namespace chameleon::shim {

/// The resolved cap and where it came from.
struct HostPoolCap {
  std::uint64_t bytes = 0;
  /// "CHAMELEON_HOST_POOL_BYTES", or HostMemorySourceName() of the host memory it halves.
  const char* source = "";
  std::string warning;  ///< non-empty: one line for the log (a source was unusable)
};

/// `explicit_bytes` is Config::host_pool_bytes (0 = not set).
HostPoolCap ResolveHostPoolCap(std::uint64_t explicit_bytes,
                               const topology::HostMemoryOptions& where);

}  // namespace chameleon::shim
