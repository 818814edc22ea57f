// AdoptedRanges: allocations at VA ranges the program reserved itself (program VMM,
// docs/executor.md "Program VMM") — adopting a range when the program maps one of its
// virtualised handles there, detaching it when the program unmaps, re-attaching it elsewhere.
// An adopted allocation swaps like any other, but its VA stays the program's: never reserved,
// released or address-freed here.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "swap/allocation_table.h"
#include "swap/allocator.h"
#include "swap/host_mapper.h"
#include "swap/residency_manager.h"
#include "swap/swap_base.h"
#include "swap/transfer_scheduler.h"
#include "swap/unmap_batcher.h"

namespace chameleon::shim::swap {

class AdoptedRanges {
 public:
  AdoptedRanges(const SwapBase& base, AllocationTable* table, Allocator* allocator,
                UnmapBatcher* unmaps, TransferScheduler* transfers, HostMapper* host_maps,
                ResidencyManager* residency)
      : base_(base),
        table_(table),
        allocator_(allocator),
        unmaps_(unmaps),
        transfers_(transfers),
        host_maps_(host_maps),
        residency_(residency) {}

  /// SwapEngine::Adopt (see there); `va` and `bytes` already checked chunk-aligned.
  CUresult Adopt(CUdeviceptr va, std::size_t bytes, AllocId* id, std::atomic<std::uint32_t>* flags);
  /// SwapEngine::Unadopt (see there).
  CUresult Unadopt(AllocId id, bool keep);
  /// SwapEngine::Rebind (see there).
  CUresult Rebind(AllocId id, CUdeviceptr va, std::atomic<std::uint32_t>* flags);

 private:
  SwapBase base_;
  AllocationTable* table_;
  Allocator* allocator_;
  UnmapBatcher* unmaps_;
  TransferScheduler* transfers_;
  HostMapper* host_maps_;
  ResidencyManager* residency_;
};

}  // namespace chameleon::shim::swap
