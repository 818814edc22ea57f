// Allocator: creates and frees the engine's swappable allocations — VA (reused from the
// free-range cache when it can), chunks (evicting under the limit), mappings and the record.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "swap/allocation_table.h"
#include "swap/discarder.h"
#include "swap/evictor.h"
#include "swap/free_range_cache.h"
#include "swap/swap_base.h"
#include "swap/transfer_scheduler.h"
#include "swap/unmap_batcher.h"

namespace chameleon::shim::swap {

class Allocator {
 public:
  Allocator(const SwapBase& base, AllocationTable* table, FreeRangeCache* free_ranges,
            UnmapBatcher* unmaps, TransferScheduler* transfers, Evictor* evictor)
      : base_(base),
        table_(table),
        free_ranges_(free_ranges),
        unmaps_(unmaps),
        transfers_(transfers),
        evictor_(evictor),
        discard_(base) {}

  /// SwapEngine::Allocate (see there), on a chunk-rounded span.
  CUresult Allocate(std::size_t bytes, CUstream stream, CUdeviceptr* ptr, AllocId* id,
                    std::atomic<std::uint32_t>* flags);
  /// Takes chunks for [va, va + span) (`stream` waits on reused ones), maps them and records the
  /// allocation. The VA must be reserved and unmapped. On failure nothing changed.
  CUresult MapNew(CUdeviceptr va, std::size_t bytes, std::size_t span, CUstream stream, AllocId* id,
                  std::atomic<std::uint32_t>* flags);
  /// SwapEngine::Free (see there).
  CUresult Free(AllocId id, CUstream stream);

 private:
  /// The record for a range mapped to `chunks`.
  Allocation* Track(CUdeviceptr va, std::size_t bytes, std::size_t span,
                    std::vector<std::uint32_t> chunks, CUstream stream, AllocId* id,
                    std::atomic<std::uint32_t>* flags);

  SwapBase base_;
  AllocationTable* table_;
  FreeRangeCache* free_ranges_;
  UnmapBatcher* unmaps_;
  TransferScheduler* transfers_;
  Evictor* evictor_;
  Discarder discard_;
};

}  // namespace chameleon::shim::swap
