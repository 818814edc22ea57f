// HostMapper: maps a swapped-out allocation's VA to pinned host memory holding its contents
// (correct but slow device access, for pages an op may reach without naming them) and takes
// that mapping away again, copying what the device wrote back to the allocation's host copy.
// Program VMM only (docs/executor.md "Program VMM").
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include "swap/allocation_table.h"
#include "swap/swap_base.h"
#include "swap/transfer_scheduler.h"
#include "swap/unmap_batcher.h"

namespace chameleon::shim::swap {

class HostMapper {
 public:
  HostMapper(const SwapBase& base, UnmapBatcher* unmaps, TransferScheduler* transfers)
      : base_(base), unmaps_(unmaps), transfers_(transfers) {}

  /// Maps swapped-out `a`'s VA to new host memory filled with its contents; `stream` (and later
  /// consumers, through `ready`) waits for the fill. Fails where the driver has no host VMM.
  CUresult Map(Allocation* a, CUstream stream);
  /// Copies the host mapping's contents back to `a`'s host copy (after its last stream's work),
  /// waits, unmaps and releases it (a counted stall: the page is needed on the device now).
  CUresult Unmap(Allocation* a);

 private:
  SwapBase base_;
  UnmapBatcher* unmaps_;
  TransferScheduler* transfers_;
};

}  // namespace chameleon::shim::swap
