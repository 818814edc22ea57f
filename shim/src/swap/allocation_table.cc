#include "swap/allocation_table.h"

namespace chameleon::shim::swap {

void MirrorFlags(const Allocation& a) {
  if (!a.flags) return;
  std::uint32_t set = 0;
  if (a.state == Residency::kSwappedOut) set |= kSwappedOut;
  if (a.state == Residency::kResident && a.ready) set |= kSwapInFlight;
  const std::uint32_t mask = kSwappedOut | kSwapInFlight;
  a.flags->fetch_and(~(mask & ~set), std::memory_order_release);
  a.flags->fetch_or(set, std::memory_order_release);
}

Allocation* AllocationTable::Add(CUdeviceptr va, std::size_t bytes, std::size_t span) {
  auto a = std::make_unique<Allocation>();
  a->id = next_id_++;
  a->va = va;
  a->bytes = bytes;
  a->span = span;
  Allocation* raw = a.get();
  by_address_[va] = a->id;
  allocs_.emplace(a->id, std::move(a));
  return raw;
}

Allocation* AllocationTable::Get(AllocId id) {
  auto it = allocs_.find(id);
  return it == allocs_.end() ? nullptr : it->second.get();
}

const Allocation* AllocationTable::Get(AllocId id) const {
  auto it = allocs_.find(id);
  return it == allocs_.end() ? nullptr : it->second.get();
}

AllocId AllocationTable::Find(CUdeviceptr address) const {
  auto it = by_address_.upper_bound(address);
  if (it == by_address_.begin()) return 0;
  --it;
  const Allocation* a = Get(it->second);
  return a && address < a->va + a->span ? a->id : 0;
}

void AllocationTable::UnindexIf(CUdeviceptr va, AllocId id) {
  auto it = by_address_.find(va);
  if (it != by_address_.end() && it->second == id) by_address_.erase(it);
}

void AllocationTable::Clear() {
  allocs_.clear();
  by_address_.clear();
}

}  // namespace chameleon::shim::swap
