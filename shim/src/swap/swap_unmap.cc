// SwapEngine: deferred unmapping (docs/executor.md, "Deferred unmapping"). A stale range is never
// unmapped on its own in the middle of an iteration: cuMemUnmap synchronises the device (CUDA
// documents it so; simgpu models it), so unmaps happen in batches — at flushes, or together with
// the one a swap-in cannot avoid — and trims unmap before releasing chunks.
#include "swap/swap_engine.h"

namespace chameleon::shim::swap {

CUresult SwapEngine::Unmap(CUdeviceptr va, std::size_t span) {
  counters_->Vmm(counters_->vmm_unmaps);
  counters_->Add(counters_->unmaps);
  return api_.mem_unmap(va, span);
}

bool SwapEngine::UnmapNow(Allocation* a) {
  bool waited = false;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].id != a->id) continue;
    // No work may still read the range when it is unmapped (real drivers leave that to the
    // caller; simgpu synchronises): wait for the swap-out copy first.
    Fence* f = pending_[i].fence;
    if (!fences_->Done(f)) {
      api_.event_synchronize(f->event);
      waited = true;
    }
    fences_->Unref(f);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  Unmap(a->va, a->span);
  a->mapped = false;
  return waited;
}

void SwapEngine::ForceUnmapLocked(Allocation* a, bool count_stall) {
  // A stall only if the swap-out copy was still running. The unmap synchronises the device
  // (simgpu's model; CUDA documents cuMemUnmap as synchronising): once it returned, every other
  // pending range whose copy has completed is unmapped too, at the cost of one call each and no
  // further synchronisation, so their swap-ins will not need one of their own.
  const std::uint64_t t0 = NowNs();
  if (UnmapNow(a) && count_stall) Stall(t0);
  counters_->Add(counters_->forced_unmaps);
  counters_->Add(counters_->device_syncs);
  FlushUnmapsLocked(/*all=*/false, /*count_sync=*/false);  // the same synchronisation
}

void SwapEngine::FlushUnmaps(bool all) {
  std::lock_guard lock(mu_);
  FlushUnmapsLocked(all);
}

std::size_t SwapEngine::FlushUnmapsLocked(bool all, bool count_sync) {
  std::size_t kept = 0;
  std::size_t unmapped = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    PendingUnmap p = pending_[i];
    const bool done = fences_->Done(p.fence);
    if (!done && !all) {
      pending_[kept++] = p;
      continue;
    }
    const std::uint64_t t0 = NowNs();
    if (!done) {
      api_.event_synchronize(p.fence->event);  // nothing may use a range being unmapped
      Stall(t0);
    }
    Unmap(p.va, p.span);
    ++unmapped;
    if (p.id == 0) {
      counters_->Vmm(counters_->vmm_reserves);
      api_.mem_address_free(p.va, p.span);
    } else if (Allocation* a = Get(p.id)) {
      a->mapped = false;
    }
    fences_->Unref(p.fence);
  }
  pending_.resize(kept);
  unmapped += FlushFreeRangesLocked(/*all=*/false);
  if (unmapped > 0 && count_sync) counters_->Add(counters_->device_syncs);
  return unmapped;
}

std::uint64_t SwapEngine::TrimPool() {
  std::lock_guard lock(mu_);
  return chunks_ ? TrimLocked() : 0;
}

std::uint64_t SwapEngine::TrimLocked() {
  // A pooled chunk may still be mapped at the stale VA of a swapped-out or freed range, and the
  // driver frees a released chunk only once its last mapping goes: unmap first what can go (the
  // same fences guard both), so the chunks Trim releases really return their memory.
  FlushUnmapsLocked(/*all=*/false);
  if (FlushFreeRangesLocked(/*all=*/true) > 0) counters_->Add(counters_->device_syncs);
  return chunks_->Trim();
}

std::uint64_t SwapEngine::DrainAndTrimLocked() {
  // Idle chunks whose last user is still running, or still mapped at a stale VA (a released
  // chunk's memory only goes when its last mapping does): wait for all of it once.
  const std::uint64_t t0 = NowNs();
  SyncSideStreams();
  counters_->Add(counters_->device_syncs);
  FlushUnmapsLocked(/*all=*/true);
  Stall(t0);
  return TrimLocked();
}

}  // namespace chameleon::shim::swap
