// Evictor: makes room for device chunks under the limit — trims idle pooled chunks, drains
// pending unmaps, and swaps out resident allocations chosen by one of two rules.
//
// Candidates: resident, swappable allocations, never one that is pinned, held by the op being
// prepared, or the requester itself. Rules (EvictionRule, CHAMELEON_EVICTION):
//   belady (default): while the previous iteration's use sequence is known (UseHistory), the
//     candidate whose next use lies farthest ahead (never used again first); ties and
//     candidates without a record by the closest-size rule. Before that: closest size.
//   closest-size (the paper's): the candidate whose size is closest to the request (ties: the
//     oldest id). Evicting needs no host wait: the taker's stream waits on the
// victim's swap-out fences through the chunk pool. Only MakeRoom/ReleaseBytes (memory needed
// outside the engine) drain, a counted stall.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "swap/allocation_table.h"
#include "swap/free_range_cache.h"
#include "swap/swap_base.h"
#include "swap/transfer_scheduler.h"
#include "swap/unmap_batcher.h"
#include "swap/use_history.h"

namespace chameleon::shim::swap {

/// How the safety net picks its victim (see Evictor).
enum class EvictionRule : std::uint8_t { kBelady, kClosestSize };

class Evictor {
 public:
  Evictor(const SwapBase& base, AllocationTable* table, TransferScheduler* transfers,
          UnmapBatcher* unmaps, FreeRangeCache* free_ranges)
      : base_(base),
        table_(table),
        transfers_(transfers),
        unmaps_(unmaps),
        free_ranges_(free_ranges) {}

  /// Evicts by the farthest next use in `history` (at the op position `*now`) while it is
  /// known; both must outlive the Evictor. Without this call: the closest-size rule.
  void UseBelady(UseHistory* history, const std::atomic<std::uint32_t>* now) {
    history_ = history;
    now_ = now;
  }
  /// Owner side of a lease: while `*lent` (bytes of this GPU the daemon lent to others) is
  /// non-zero, each eviction asks for up to that much back (reclaim_request_bytes). Never waits
  /// for the answer: the eviction goes ahead. `lent` must outlive the Evictor.
  void AskBackLent(const std::atomic<std::uint64_t>* lent) { lent_ = lent; }
  /// The victim the closest-size rule picks for a request of `bytes`, or null.
  Allocation* PickClosest(std::size_t bytes, AllocId exclude) const;
  /// The victim of the farthest next use (ties: closest size, then the oldest), or null.
  /// Requires history->known().
  Allocation* PickFarthest(std::size_t bytes, AllocId exclude) const;
  /// The victim the rule in force picks.
  Allocation* Pick(std::size_t bytes, AllocId exclude) const;
  /// Swaps out Pick's victim (counted in evictions). False when there was none or its swap-out
  /// failed.
  bool EvictClosest(std::size_t bytes, AllocId exclude);
  /// ChunkPool::Take that evicts (never `exclude`) until the chunks fit or nobody is left.
  CUresult TakeChunks(std::uint32_t n, CUstream wait_stream, AllocId exclude,
                      std::vector<std::uint32_t>* out, std::vector<Fence*>* fences = nullptr);
  /// Room for `bytes` allocated outside the engine: trim, then drain and evict (counted
  /// stalls). True when created chunk bytes + external bytes + `bytes` <= the limit afterwards.
  bool MakeRoom(std::uint64_t bytes);
  /// Gives at least `bytes` of chunks back to the driver, evicting if needed. False when
  /// nothing could be released.
  bool ReleaseBytes(std::uint64_t bytes);
  /// Releases idle pooled chunks until `want` bytes went: first those no VA maps any more (no
  /// driver call but the release), and only if they fall short, unmaps the ranges whose fences
  /// completed (free ranges too; one device synchronisation) and releases every idle chunk.
  /// Returns the bytes released.
  std::uint64_t Trim(std::uint64_t want = UINT64_MAX);
  /// Waits for the side streams and every pending unmap, then trims (a counted stall).
  std::uint64_t DrainAndTrim();

 private:
  SwapBase base_;
  AllocationTable* table_;
  TransferScheduler* transfers_;
  UnmapBatcher* unmaps_;
  FreeRangeCache* free_ranges_;
  UseHistory* history_ = nullptr;                     // null: the closest-size rule
  const std::atomic<std::uint32_t>* now_ = nullptr;   // the current op's position
  const std::atomic<std::uint64_t>* lent_ = nullptr;  // AskBackLent
  void RequestReclaim(std::uint64_t bytes);
};

}  // namespace chameleon::shim::swap
