#include "swap/destinations.h"

#include <algorithm>
#include <limits>

namespace chameleon::shim::swap {
namespace {

// NUMA nodes a policy may name. Linux builds with at most 1024 (CONFIG_NODES_SHIFT 10); real
// nodes have a handful. The bound only keeps a corrupt helper field from creating pools by the
// thousand: an unknown node is refused by the driver once and its pool stays blocked.
constexpr std::uint16_t kMaxNumaNodes = 64;

}  // namespace

VmmBufferPool* Destinations::PoolFor(Placement p) {
  if (p.tier == ipc::Tier::kPeerGpu && !caps_.contains(p.helper)) return nullptr;  // no lease
  if (p.tier == ipc::Tier::kHostNuma && p.helper >= kMaxNumaNodes) return nullptr;
  auto& pool = pools_[Key{p.tier, p.helper}];
  if (!pool) {
    CUmemLocation location = {};
    location.type = p.tier == ipc::Tier::kPeerGpu ? CU_MEM_LOCATION_TYPE_DEVICE
                                                  : CU_MEM_LOCATION_TYPE_HOST_NUMA;
    location.id = p.helper;
    pool = std::make_unique<VmmBufferPool>(base_, location, device_);
  }
  return pool.get();
}

std::uint64_t Destinations::LimitFor(Placement p, const VmmBufferPool& pool) const {
  if (p.tier == ipc::Tier::kPeerGpu) {
    auto it = caps_.find(p.helper);
    return it != caps_.end() ? it->second : 0;
  }
  // A NUMA node's buffers are pinned host memory too: they share the host pool's cap.
  const std::uint64_t used = host_->held_bytes() + numa_held_;
  const std::uint64_t cap = host_->cap_bytes();
  return pool.held_bytes() + (cap > used ? cap - used : 0);
}

void Destinations::PublishHeld() {
  std::uint64_t peer = 0, numa = 0;
  for (const auto& [key, pool] : pools_) {
    (key.first == ipc::Tier::kPeerGpu ? peer : numa) += pool->held_bytes();
  }
  numa_held_ = numa;
  base_.counters->peer_held_bytes.store(peer, std::memory_order_relaxed);
}

void* Destinations::Acquire(Placement want, std::size_t span, Fence** fence, Placement* got) {
  *got = Placement{};
  const bool own_device = want.tier == ipc::Tier::kPeerGpu && want.helper == device_;
  if (!want.host() && mode_ == PlacementMode::kAuto && peer_copies_ && !own_device) {
    if (VmmBufferPool* pool = PoolFor(want)) {
      const CUdeviceptr va = pool->Acquire(span, LimitFor(want, *pool), fence);
      PublishHeld();
      if (va != 0) {
        *got = want;
        return reinterpret_cast<void*>(va);
      }
    }
  }
  if (!want.host()) base_.counters->Add(base_.counters->placement_fallbacks);
  return host_->Acquire(span, fence);
}

void Destinations::Release(void* buffer, std::size_t span, Placement where, Fence* busy) {
  if (buffer == nullptr) return;
  if (where.host()) {
    host_->Release(buffer, span, busy);
    return;
  }
  if (auto it = pools_.find(Key{where.tier, where.helper}); it != pools_.end()) {
    it->second->Release(reinterpret_cast<CUdeviceptr>(buffer), span, busy);
  }
}

void Destinations::SetLeases(std::span<const ipc::LeaseGrant> leases) {
  caps_.clear();
  for (const ipc::LeaseGrant& l : leases) {
    if (l.helper == device_) continue;  // a lease on our own GPU lends us nothing
    std::uint64_t& cap = caps_[l.helper];
    cap = l.bytes > std::numeric_limits<std::uint64_t>::max() - cap
              ? std::numeric_limits<std::uint64_t>::max()
              : cap + l.bytes;
  }
  for (auto& [key, pool] : pools_) pool->Unblock();
}

std::uint64_t Destinations::OverCap(std::uint16_t helper) const {
  auto it = pools_.find(Key{ipc::Tier::kPeerGpu, helper});
  if (it == pools_.end()) return 0;
  auto cap = caps_.find(helper);
  const std::uint64_t limit = cap != caps_.end() ? cap->second : 0;
  const std::uint64_t held = it->second->held_bytes();
  return held > limit ? held - limit : 0;
}

bool Destinations::WithinCaps() const {
  for (const auto& [key, pool] : pools_) {
    if (key.first == ipc::Tier::kPeerGpu && OverCap(key.second) > 0) return false;
  }
  return true;
}

void Destinations::Trim(bool all) {
  for (auto& [key, pool] : pools_) {
    if (all) {
      pool->Trim(0, /*wait=*/true);
    } else if (key.first == ipc::Tier::kPeerGpu) {
      auto cap = caps_.find(key.second);
      pool->Trim(cap != caps_.end() ? cap->second : 0, /*wait=*/false);
    }
  }
  PublishHeld();
}

std::uint64_t Destinations::peer_held_bytes() const {
  std::uint64_t peer = 0;
  for (const auto& [key, pool] : pools_) {
    if (key.first == ipc::Tier::kPeerGpu) peer += pool->held_bytes();
  }
  return peer;
}

}  // namespace chameleon::shim::swap
