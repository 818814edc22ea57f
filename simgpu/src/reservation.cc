#include "reservation.h"

namespace chameleon::simgpu {

Location Reservation::LocationAt(std::size_t offset) {
  std::lock_guard lock(mu);
  auto it = maps.upper_bound(offset);
  if (it == maps.begin()) return {};
  --it;
  if (offset - it->first >= it->second.size) return {};
  return Location{true, it->second.chunk->host, it->second.chunk->device};
}

}  // namespace chameleon::simgpu
