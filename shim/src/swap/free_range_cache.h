// FreeRangeCache: keeps freed VA ranges, still mapped to the chunks they released, so that the
// next allocation of the same span can take one back whole (no driver call) or at least reuse
// its VA (no reserve/free pair).
//
// Why: a training step frees and allocates the same tensor sizes over and over; taking a range
// back whole saves reserve, map, set-access, unmap and address free (five or more driver calls,
// and the unmap would synchronise the device). Once its chunks serve someone else the range is
// stale: it is unmapped in the next batch of unmaps (never on its own, see UnmapBatcher) and its
// VA stays cached for reuse.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "swap/swap_base.h"

namespace chameleon::shim::swap {

class FenceSweep;

class FreeRangeCache {
 public:
  explicit FreeRangeCache(const SwapBase& base) : base_(base) {}

  /// The free of a resident allocation at [va, va + span): releases `chunks` to the pool with
  /// `fence` (whose reference this takes) and keeps the range mapped to them.
  void Cache(CUdeviceptr va, std::size_t span, std::vector<std::uint32_t> chunks, Fence* fence);
  /// A cached range of `span` for a new allocation first used on `stream`: a mapped one whose
  /// chunks are intact (`*chunks` filled, `stream` waits on the free's fence), else an unmapped
  /// one (`*chunks` empty). 0 when none.
  CUdeviceptr Reuse(std::size_t span, CUstream stream, std::vector<std::uint32_t>* chunks);
  /// Unmaps cached ranges whose free fence completed and whose chunks were reused (`all`: also
  /// the intact ones, so that trimmed chunks really return their memory), then releases the VA
  /// of unmapped ones beyond the cap. Returns the number unmapped. `sweep`: the caller's, when
  /// it checks other fences in the same batch (one query per stream for both).
  std::size_t Flush(bool all, FenceSweep* sweep = nullptr);
  /// Unmaps and releases every cached range (destruction; the device is idle).
  void Drop();

  std::size_t size() const { return ranges_.size(); }
  std::size_t mapped() const;  ///< cached ranges still mapped (for tests)

 private:
  struct Range {
    CUdeviceptr va = 0;
    std::size_t span = 0;
    bool mapped = true;
    std::vector<std::uint32_t> chunks;  // released chunks, while mapped
    std::vector<std::uint64_t> epochs;
    Fence* fence = nullptr;  // the free's fence (one reference), while mapped
  };

  SwapBase base_;
  std::multimap<std::size_t, Range> ranges_;  // span -> range, oldest first per span
};

}  // namespace chameleon::shim::swap
