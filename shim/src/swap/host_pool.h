// Pinned host buffers that hold swapped-out tensors, reused by size and capped.
//
// Reuse ordering. Swap-outs write these buffers on the executor's out stream and swap-ins read
// them on its in stream; the two streams run concurrently (full duplex). Writes are ordered
// among themselves by the out stream, but a buffer handed to the next swap-out may still be
// read by the swap-in copy that released it: so a buffer carries a Fence, the event recorded
// after that read, and the acquirer makes the out stream wait on it before writing (no host
// wait). Buffers freed to the driver (cap pressure, destruction) first wait for their fence on
// the host: a rare path.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "swap/chunk_pool.h"
#include "swap/counters.h"
#include "swap/driver_api.h"

namespace chameleon::shim::swap {

class HostPool {
 public:
  /// `fences` (may be null: buffers then carry no fences) recycles the buffers' fences.
  HostPool(const DriverApi* api, SwapCounters* counters, std::uint64_t cap_bytes,
           FencePool* fences = nullptr)
      : api_(api), counters_(counters), cap_bytes_(cap_bytes), fences_(fences) {}
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  /// A buffer of exactly `bytes` (a cached one of that size, else cuMemHostAlloc, first freeing
  /// cached buffers of other sizes if the cap requires). Null when the cap cannot be met.
  /// `*fence` (if given) receives the fence the buffer carries, with its reference, or null: the
  /// caller must order its writes after it (cuStreamWaitEvent) and Unref it.
  void* Acquire(std::size_t bytes, Fence** fence = nullptr);
  /// Returns a buffer obtained from Acquire(bytes) to the cache. `fence` (may be null): work that
  /// still reads or writes the buffer; a reference is taken.
  void Release(void* buffer, std::size_t bytes, Fence* fence = nullptr);

  /// Pinned bytes held elsewhere that share the cap (NUMA-node buffers, Destinations): counted
  /// in every later cap check. `bytes` must outlive the pool; null = none.
  void CountAlso(const std::uint64_t* bytes) { also_ = bytes; }

  std::uint64_t held_bytes() const { return held_bytes_; }  ///< cached + in use
  std::uint64_t cap_bytes() const { return cap_bytes_; }
  std::uint64_t allocations() const { return allocations_; }  ///< cuMemHostAlloc calls

 private:
  struct Cached {
    void* buffer = nullptr;
    Fence* fence = nullptr;
  };
  void FreeOne(std::multimap<std::size_t, Cached>::iterator it);

  const DriverApi* api_;
  SwapCounters* counters_;
  std::uint64_t cap_bytes_;
  FencePool* fences_;
  std::uint64_t held_bytes_ = 0;
  const std::uint64_t* also_ = nullptr;
  std::uint64_t allocations_ = 0;
  std::multimap<std::size_t, Cached> cached_;  // size -> idle buffer
};

}  // namespace chameleon::shim::swap
