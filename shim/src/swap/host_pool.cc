#include "swap/host_pool.h"

namespace chameleon::shim::swap {

HostPool::~HostPool() {
  while (!cached_.empty()) FreeOne(cached_.begin());
}

void HostPool::FreeOne(std::multimap<std::size_t, void*>::iterator it) {
  api_->mem_free_host(it->second);
  held_bytes_ -= it->first;
  cached_.erase(it);
  counters_->host_pool_bytes.store(held_bytes_, std::memory_order_relaxed);
}

void* HostPool::Acquire(std::size_t bytes) {
  if (auto it = cached_.find(bytes); it != cached_.end()) {
    void* p = it->second;
    cached_.erase(it);
    return p;
  }
  if (bytes > cap_bytes_) return nullptr;
  // Make room under the cap by dropping idle buffers of other sizes, largest first.
  while (held_bytes_ + bytes > cap_bytes_ && !cached_.empty()) FreeOne(std::prev(cached_.end()));
  if (held_bytes_ + bytes > cap_bytes_) return nullptr;
  void* p = nullptr;
  if (api_->mem_host_alloc(&p, bytes, 0) != CUDA_SUCCESS || p == nullptr) return nullptr;
  ++allocations_;
  held_bytes_ += bytes;
  counters_->host_pool_bytes.store(held_bytes_, std::memory_order_relaxed);
  return p;
}

void HostPool::Release(void* buffer, std::size_t bytes) {
  if (buffer) cached_.emplace(bytes, buffer);
}

}  // namespace chameleon::shim::swap
