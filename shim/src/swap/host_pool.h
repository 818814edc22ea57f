// Pinned host buffers that hold swapped-out tensors, reused by size and capped.
//
// Reuse ordering: every read and write of these buffers is a copy on the executor's single side
// stream, so a buffer released after its swap-in copy was *issued* may be handed to the next
// swap-out at once: stream order puts that copy after the earlier one. No fence needed.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "swap/counters.h"
#include "swap/driver_api.h"

namespace chameleon::shim::swap {

class HostPool {
 public:
  HostPool(const DriverApi* api, SwapCounters* counters, std::uint64_t cap_bytes)
      : api_(api), counters_(counters), cap_bytes_(cap_bytes) {}
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  /// A buffer of exactly `bytes` (a cached one of that size, else cuMemHostAlloc, first freeing
  /// cached buffers of other sizes if the cap requires). Null when the cap cannot be met.
  void* Acquire(std::size_t bytes);
  /// Returns a buffer obtained from Acquire(bytes) to the cache.
  void Release(void* buffer, std::size_t bytes);

  std::uint64_t held_bytes() const { return held_bytes_; }  ///< cached + in use
  std::uint64_t cap_bytes() const { return cap_bytes_; }
  std::uint64_t allocations() const { return allocations_; }  ///< cuMemHostAlloc calls

 private:
  void FreeOne(std::multimap<std::size_t, void*>::iterator it);

  const DriverApi* api_;
  SwapCounters* counters_;
  std::uint64_t cap_bytes_;
  std::uint64_t held_bytes_ = 0;
  std::uint64_t allocations_ = 0;
  std::multimap<std::size_t, void*> cached_;  // size -> idle buffer
};

}  // namespace chameleon::shim::swap
