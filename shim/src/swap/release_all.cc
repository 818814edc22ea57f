#include "swap/release_all.h"

namespace chameleon::shim::swap {

void ReleaseAllAllocations(AllocationTable& table, VaMapper& vmm, TransferScheduler& transfers,
                           FencePool& fences) {
  table.ForEach([&](Allocation& a) {
    if (a.mapped) vmm.Unmap(a.va, a.span);
    if (!a.adopted) vmm.FreeAddress(a.va, a.span);
    transfers.ReleaseCopy(&a);
    fences.Unref(a.ready);
    fences.Unref(a.out_done);
  });
  table.Clear();
}

}  // namespace chameleon::shim::swap
