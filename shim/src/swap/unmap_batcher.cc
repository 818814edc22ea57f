#include "swap/unmap_batcher.h"

#include "swap/fence_sweep.h"
#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

void UnmapBatcher::Defer(AllocId id, CUdeviceptr va, std::size_t span, Fence* fence) {
  pending_.push_back({id, va, span, fence});
}

void UnmapBatcher::Cancel(AllocId id) {
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].id != id) continue;
    base_.fences->Unref(pending_[i].fence);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

bool UnmapBatcher::Orphan(AllocId id) {
  bool converted = false;
  for (Pending& p : pending_) {
    if (p.id == id) {
      p.id = 0;  // unmap (when the copy is done) then release the VA
      converted = true;
    }
  }
  return converted;
}

bool UnmapBatcher::UnmapNow(Allocation* a) {
  bool waited = false;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].id != a->id) continue;
    // No work may still read the range when it is unmapped (real drivers leave that to the
    // caller; simgpu synchronises): wait for the swap-out copy first.
    Fence* f = pending_[i].fence;
    if (!base_.fences->Done(f)) {
      base_.api->event_synchronize(f->event);
      waited = true;
    }
    base_.fences->Unref(f);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  base_.vmm->Unmap(a->va, a->span);
  a->mapped = false;
  return waited;
}

void UnmapBatcher::ForceUnmap(Allocation* a, bool count_stall) {
  // A stall only if the swap-out copy was still running. The unmap synchronises the device
  // (simgpu's model; CUDA documents cuMemUnmap as synchronising): once it returned, every other
  // pending range whose copy has completed is unmapped too, at the cost of one call each and no
  // further synchronisation, so their swap-ins will not need one of their own.
  const std::uint64_t t0 = NowNs();
  if (UnmapNow(a) && count_stall) CountStall(base_.counters, t0);
  base_.counters->Add(base_.counters->forced_unmaps);
  base_.counters->Add(base_.counters->device_syncs);
  Flush(/*all=*/false, /*count_sync=*/false);  // the same synchronisation
}

std::size_t UnmapBatcher::Flush(bool all, bool count_sync) {
  std::size_t kept = 0;
  std::size_t unmapped = 0;
  // One query per stream where it has drained, not one per range (fence_sweep.h).
  FenceSweep sweep(base_.fences);
  std::vector<const Fence*> fences;
  fences.reserve(pending_.size());
  for (const Pending& p : pending_) fences.push_back(p.fence);
  sweep.Prime(fences);
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Pending p = pending_[i];
    const bool done = sweep.Done(p.fence);
    if (!done && !all) {
      pending_[kept++] = p;
      continue;
    }
    const std::uint64_t t0 = NowNs();
    if (!done) {
      base_.api->event_synchronize(p.fence->event);  // nothing may use a range being unmapped
      CountStall(base_.counters, t0);
    }
    base_.vmm->Unmap(p.va, p.span);
    ++unmapped;
    if (p.id == 0) {
      base_.vmm->FreeAddress(p.va, p.span);
    } else if (Allocation* a = table_->Get(p.id)) {
      a->mapped = false;
    }
    base_.fences->Unref(p.fence);
  }
  pending_.resize(kept);
  unmapped += free_ranges_->Flush(/*all=*/false, &sweep);
  if (unmapped > 0 && count_sync) base_.counters->Add(base_.counters->device_syncs);
  return unmapped;
}

}  // namespace chameleon::shim::swap
