// AllocationTable: the swap engine's allocation records, by id and by address, and the mirror
// of each record's residency into its caller-owned flags word.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "swap/allocation_flags.h"
#include "swap/chunk_pool.h"
#include "swap/placement.h"

namespace chameleon::shim::swap {

/// Identity of an allocation (monotonic, never reused: a stale id simply finds nothing).
using AllocId = std::uint64_t;

enum class Residency : std::uint8_t { kUnknown, kResident, kSwappedOut };

/// One swappable allocation (the engine's own, or adopted at the program's VA).
struct Allocation {
  AllocId id = 0;
  CUdeviceptr va = 0;
  std::size_t bytes = 0;  ///< requested
  std::size_t span = 0;   ///< chunk-rounded, reserved and mapped
  Residency state = Residency::kResident;
  bool mapped = true;  ///< VA has mappings (resident, or swapped with its unmap deferred)
  bool pinned = false;
  bool held = false;                  ///< named by the op being prepared: never evicted for it
  bool wait_counted = false;          ///< hit/miss counted for the current `ready`
  std::vector<std::uint32_t> chunks;  ///< mapped chunks, or the released ones when swapped
  std::vector<std::uint64_t> epochs;  ///< chunk epochs at release (Reclaim)
  void* host = nullptr;               ///< the copy at its destination while swapped out
  Placement where;                    ///< that destination (a peer's or NUMA node's VA in `host`)
  Fence* ready = nullptr;             ///< consumers wait on this (swap-in / reclaim done)
  Fence* out_done = nullptr;          ///< swap-out copy done
  CUstream last_stream = nullptr;
  std::atomic<std::uint32_t>* flags =
      nullptr;  ///< caller's word; kSwappedOut / kSwapInFlight mirrored (allocation_flags.h)
  bool adopted = false;  ///< Adopt: the VA is the program's (never address-freed here)
  CUmemGenericAllocationHandle host_map = 0;  ///< swapped out, VA mapped to host memory
};

/// Writes `a`'s kSwappedOut / kSwapInFlight bits into its flags word (if any), release-ordered.
void MirrorFlags(const Allocation& a);

class AllocationTable {
 public:
  /// A new record with the next id for [va, va + span), indexed at `va`.
  Allocation* Add(CUdeviceptr va, std::size_t bytes, std::size_t span);
  Allocation* Get(AllocId id);
  const Allocation* Get(AllocId id) const;
  /// The indexed allocation whose span contains `address`, or 0.
  AllocId Find(CUdeviceptr address) const;
  /// Makes `va` find `id` (a rebind).
  void Index(CUdeviceptr va, AllocId id) { by_address_[va] = id; }
  /// Forgets the index entry at `va`, whichever allocation it names.
  void Unindex(CUdeviceptr va) { by_address_.erase(va); }
  /// Forgets the index entry at `va` only if it names `id` (a detached range's VA may serve
  /// another allocation by now).
  void UnindexIf(CUdeviceptr va, AllocId id);
  /// Drops the record (not its index entry).
  void Erase(AllocId id) { allocs_.erase(id); }
  /// The id the next allocation will get (ids are handed out in increasing order).
  AllocId next_id() const { return next_id_; }
  /// Drops every record and index entry.
  void Clear();
  template <typename Fn>
  void ForEach(Fn&& fn) {
    for (auto& [id, a] : allocs_) fn(*a);
  }
  std::size_t size() const { return allocs_.size(); }

 private:
  AllocId next_id_ = 1;
  std::unordered_map<AllocId, std::unique_ptr<Allocation>> allocs_;
  std::map<CUdeviceptr, AllocId> by_address_;
};

}  // namespace chameleon::shim::swap
