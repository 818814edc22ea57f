#include "swap/host_pool.h"

namespace chameleon::shim::swap {

HostPool::~HostPool() {
  while (!cached_.empty()) FreeOne(cached_.begin());
}

void HostPool::FreeOne(std::multimap<std::size_t, Cached>::iterator it) {
  // A copy may still read (or write) the buffer: freeing pinned memory under it is undefined.
  if (Fence* f = it->second.fence) {
    if (!fences_->Done(f)) api_->event_synchronize(f->event);
    fences_->Unref(f);
  }
  api_->mem_free_host(it->second.buffer);
  held_bytes_ -= it->first;
  cached_.erase(it);
  counters_->host_pool_bytes.store(held_bytes_, std::memory_order_relaxed);
}

void* HostPool::Acquire(std::size_t bytes, Fence** fence) {
  if (fence) *fence = nullptr;
  if (auto it = cached_.find(bytes); it != cached_.end()) {
    const Cached c = it->second;
    cached_.erase(it);
    if (fence) {
      *fence = c.fence;
    } else if (c.fence) {
      fences_->Unref(c.fence);  // the caller orders its use otherwise
    }
    return c.buffer;
  }
  const std::uint64_t also = also_ ? *also_ : 0;
  if (bytes > cap_bytes_ || also > cap_bytes_ - bytes) return nullptr;
  const std::uint64_t cap = cap_bytes_ - also;
  // Make room under the cap by dropping idle buffers of other sizes, largest first.
  while (held_bytes_ + bytes > cap && !cached_.empty()) FreeOne(std::prev(cached_.end()));
  if (held_bytes_ + bytes > cap) return nullptr;
  void* p = nullptr;
  if (api_->mem_host_alloc(&p, bytes, 0) != CUDA_SUCCESS || p == nullptr) return nullptr;
  ++allocations_;
  held_bytes_ += bytes;
  counters_->host_pool_bytes.store(held_bytes_, std::memory_order_relaxed);
  return p;
}

void HostPool::Release(void* buffer, std::size_t bytes, Fence* fence) {
  if (!buffer) return;
  if (fence && fences_) {
    FencePool::Ref(fence);
  } else {
    fence = nullptr;
  }
  cached_.emplace(bytes, Cached{buffer, fence});
}

}  // namespace chameleon::shim::swap
