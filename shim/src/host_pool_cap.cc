#include "host_pool_cap.h"

namespace chameleon::shim {

HostPoolCap ResolveHostPoolCap(std::uint64_t explicit_bytes,
                               const topology::HostMemoryOptions& where) {
  HostPoolCap cap;
  if (explicit_bytes != 0) {
    cap.bytes = explicit_bytes;
    cap.source = "CHAMELEON_HOST_POOL_BYTES";
    return cap;
  }
  const topology::HostMemory host = topology::ReadHostMemory(where);
  cap.bytes = host.total() / 2;
  cap.source = topology::HostMemorySourceName(host.source);
  cap.warning = host.warning;
  return cap;
}

}  // namespace chameleon::shim
