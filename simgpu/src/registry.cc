#include "registry.h"

#include <mutex>

#include "reservation.h"

namespace chameleon::simgpu {

void Registry::Add(const Range& r) {
  std::unique_lock lock(mu_);
  ranges_[r.base] = r;
}

bool Registry::Remove(std::uintptr_t base, Range* removed) {
  std::unique_lock lock(mu_);
  auto it = ranges_.find(base);
  if (it == ranges_.end()) return false;
  if (removed) *removed = it->second;
  ranges_.erase(it);
  return true;
}

std::optional<Range> Registry::Find(std::uintptr_t addr) const {
  std::shared_lock lock(mu_);
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (addr - it->first >= it->second.size) return std::nullopt;
  return it->second;
}

Place Registry::Classify(std::uintptr_t addr, int* device, int* numa) const {
  auto r = Find(addr);
  if (!r) return Place::kPageableHost;
  switch (r->kind) {
    case RangeKind::kDevice:
      *device = r->device;
      return Place::kDevice;
    case RangeKind::kPinnedHost:
      if (numa) *numa = r->numa;
      return Place::kPinnedHost;
    case RangeKind::kReservation:
      break;
  }
  Location loc = r->reservation->LocationAt(addr - r->base);
  if (loc.mapped && loc.host) {
    if (numa) *numa = loc.numa;
    return Place::kPinnedHost;
  }
  *device = loc.device;
  return loc.mapped ? Place::kDevice : Place::kUnmappedDevice;
}

}  // namespace chameleon::simgpu
