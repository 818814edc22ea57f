// ReleaseAllAllocations: the last step of tearing the engine's parts down — every allocation's
// VA, host copy and fences given back, the table emptied — shared by ~SwapEngine and the parts'
// test fixture so that both tear down in the one order the pools rely on.
//
// Not thread-safe: the caller holds SwapEngine's mutex (or owns the parts alone), and the device
// must be idle (no copy or kernel still using a range).
#pragma once

#include "swap/allocation_table.h"
#include "swap/chunk_pool.h"
#include "swap/transfer_scheduler.h"
#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

/// Unmaps every mapped range, frees every engine-reserved VA (adopted ranges are the program's),
/// releases each host copy and fence reference, then clears `table`.
void ReleaseAllAllocations(AllocationTable& table, VaMapper& vmm, TransferScheduler& transfers,
                           FencePool& fences);

}  // namespace chameleon::shim::swap
