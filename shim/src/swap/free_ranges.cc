// SwapEngine: the free-range cache. A training step frees and allocates the same tensor sizes
// over and over; a freed range is kept mapped to the chunks it released, so the next allocation
// of its span can take it back whole while nobody has reused those chunks: no reserve, map,
// set-access, unmap or address free (five or more driver calls, and the unmap would
// synchronise the device). Once its chunks serve someone else the range is stale: it is
// unmapped in the next batch of unmaps (never on its own) and its VA stays cached for reuse.
#include "swap/swap_engine.h"

namespace chameleon::shim::swap {
namespace {

// Cached ranges beyond this many give their VA back to the driver (unmapped ones, smallest span
// first: the multimap's order).
constexpr std::size_t kMaxFreeRanges = 512;
// Candidates of one span examined per allocation (bounds the lock hold time).
constexpr int kMaxProbe = 8;

}  // namespace

void SwapEngine::CacheFreeRangeLocked(Allocation* a, Fence* fence) {
  FreeRange r;
  r.va = a->va;
  r.span = a->span;
  chunks_->Release(a->chunks, fence, &r.epochs);
  r.chunks = std::move(a->chunks);
  r.fence = fence;
  free_ranges_.emplace(r.span, std::move(r));
}

CUdeviceptr SwapEngine::ReuseFreeRangeLocked(std::size_t span, CUstream stream,
                                             std::vector<std::uint32_t>* chunks) {
  auto [it, end] = free_ranges_.equal_range(span);
  auto unmapped = end;
  for (int probed = 0; it != end && probed < kMaxProbe; ++it, ++probed) {
    FreeRange& r = it->second;
    if (!r.mapped) {
      if (unmapped == end) unmapped = it;
      continue;
    }
    if (!chunks_->Reclaim(r.chunks, r.epochs)) continue;
    // Stream-ordered reuse, as for any pooled chunk: the new owner waits for the free.
    if (r.fence && !fences_->Done(r.fence)) api_.stream_wait_event(stream, r.fence->event, 0);
    fences_->Unref(r.fence);
    const CUdeviceptr va = r.va;
    *chunks = std::move(r.chunks);
    free_ranges_.erase(it);
    counters_->Add(counters_->range_reuses);
    return va;
  }
  if (unmapped == end) return 0;
  const CUdeviceptr va = unmapped->second.va;
  free_ranges_.erase(unmapped);
  return va;
}

std::size_t SwapEngine::FlushFreeRangesLocked(bool all) {
  std::size_t n = 0;
  for (auto& [span, r] : free_ranges_) {
    if (!r.mapped || !fences_->Done(r.fence)) continue;
    if (!all && chunks_->Intact(r.chunks, r.epochs)) continue;  // still reusable as is
    Unmap(r.va, r.span);
    r.mapped = false;
    fences_->Unref(r.fence);
    r.fence = nullptr;
    r.chunks.clear();
    r.epochs.clear();
    ++n;
  }
  for (auto it = free_ranges_.begin();
       free_ranges_.size() > kMaxFreeRanges && it != free_ranges_.end();) {
    if (it->second.mapped) {
      ++it;
      continue;
    }
    counters_->Vmm(counters_->vmm_reserves);
    api_.mem_address_free(it->second.va, it->second.span);
    it = free_ranges_.erase(it);
  }
  return n;
}

void SwapEngine::DropFreeRangesLocked() {
  for (auto& [span, r] : free_ranges_) {
    if (r.mapped) Unmap(r.va, r.span);
    fences_->Unref(r.fence);
    counters_->Vmm(counters_->vmm_reserves);
    api_.mem_address_free(r.va, r.span);
  }
  free_ranges_.clear();
}

}  // namespace chameleon::shim::swap
