// VmmBufferPool: buffers at one VMM location other than the executor's device — a peer GPU, or
// a host NUMA node — that hold swapped-out copies. Each buffer is one cuMemCreate allocation at
// that location, mapped at a VA of its own and made accessible to the executor's device
// (cuMemSetAccess), so a swap copy is a device-to-device copy over the peer link (or the host
// link to that node). Buffers are reused by exact span, like HostPool's, and carry a fence: the
// last copy that read or wrote them (the next user's stream waits on it; freeing one waits for it
// on the host, a rare path).
//
// The pool knows no cap of its own: each Acquire says how many bytes the pool may hold then
// (a lease's bytes for a peer, what the host cap leaves for a NUMA node), so a lease can shrink
// under it. A refused cuMemCreate (the peer is full) blocks growth until Unblock: no driver call
// is retried on every swap-out.
//
// Not thread-safe: owned by Destinations, used under SwapEngine's mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>

#include "swap/swap_base.h"

namespace chameleon::shim::swap {

class VmmBufferPool {
 public:
  /// Buffers at `location`, accessible read-write from device `accessor`.
  VmmBufferPool(const SwapBase& base, CUmemLocation location, int accessor)
      : base_(base), location_(location), accessor_(accessor) {}
  /// Frees every idle buffer (after its fence). Buffers still in use must be released first.
  ~VmmBufferPool();
  VmmBufferPool(const VmmBufferPool&) = delete;
  VmmBufferPool& operator=(const VmmBufferPool&) = delete;

  /// The VA of a buffer of `span` bytes (none while the pool holds more than `limit`): an idle
  /// one of that span, else a new one if the pool
  /// then holds at most `limit` bytes (idle buffers of other spans are freed first if needed,
  /// largest first). 0 when neither. `*fence` receives the buffer's fence with its reference (or
  /// null): the caller orders its writes after it and Unrefs it.
  CUdeviceptr Acquire(std::size_t span, std::uint64_t limit, Fence** fence);
  /// Gives back a buffer from Acquire(span). `busy` (may be null): work that still uses it.
  void Release(CUdeviceptr va, std::size_t span, Fence* busy);
  /// Frees idle buffers until the pool holds at most `limit` bytes; with `wait` false only those
  /// whose fence has completed (no host wait). Returns the bytes freed.
  std::uint64_t Trim(std::uint64_t limit, bool wait);
  /// Lets the pool try cuMemCreate again (after a refusal).
  void Unblock() { blocked_ = false; }

  std::uint64_t held_bytes() const { return held_bytes_; }  ///< idle + in use
  std::uint64_t creates() const { return creates_; }        ///< buffers created so far

 private:
  struct Buffer {
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle handle = 0;
    Fence* fence = nullptr;  ///< idle buffers only
  };
  CUdeviceptr Create(std::size_t span);
  void FreeOne(std::multimap<std::size_t, Buffer>::iterator it);

  SwapBase base_;
  CUmemLocation location_;
  int accessor_;
  bool blocked_ = false;
  std::uint64_t held_bytes_ = 0;
  std::uint64_t creates_ = 0;
  std::multimap<std::size_t, Buffer> idle_;                             // span -> idle buffer
  std::unordered_map<CUdeviceptr, CUmemGenericAllocationHandle> used_;  // va -> its handle
};

}  // namespace chameleon::shim::swap
