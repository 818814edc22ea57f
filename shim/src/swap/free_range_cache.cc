#include "swap/free_range_cache.h"

#include "swap/fence_sweep.h"
#include "swap/va_mapper.h"

namespace chameleon::shim::swap {
namespace {

// Cached ranges beyond this many give their VA back to the driver (unmapped ones, smallest span
// first: the multimap's order). Above what a training step frees between two batches of unmaps:
// GPT-2 XL B8 S1024 frees ~1,460 tensors a step, and with 512 each batch gave ~950 VAs back (one
// cuMemAddressFree each, on the host's critical path after a forced unmap) that the next step
// reserved again. Unmapped VA costs no memory.
constexpr std::size_t kMaxFreeRanges = 4096;
// Candidates of one span examined per allocation (bounds the lock hold time).
constexpr int kMaxProbe = 8;

}  // namespace

void FreeRangeCache::Cache(CUdeviceptr va, std::size_t span, std::vector<std::uint32_t> chunks,
                           Fence* fence) {
  Range r;
  r.va = va;
  r.span = span;
  base_.chunks->Release(chunks, fence, &r.epochs);
  r.chunks = std::move(chunks);
  r.fence = fence;
  ranges_.emplace(r.span, std::move(r));
}

CUdeviceptr FreeRangeCache::Reuse(std::size_t span, CUstream stream,
                                  std::vector<std::uint32_t>* chunks) {
  auto [it, end] = ranges_.equal_range(span);
  auto unmapped = end;
  for (int probed = 0; it != end && probed < kMaxProbe; ++it, ++probed) {
    Range& r = it->second;
    if (!r.mapped) {
      if (unmapped == end) unmapped = it;
      continue;
    }
    if (!base_.chunks->Reclaim(r.chunks, r.epochs)) continue;
    // Stream-ordered reuse, as for any pooled chunk: the new owner waits for the free.
    if (r.fence && !base_.fences->Done(r.fence)) {
      base_.api->stream_wait_event(stream, r.fence->event, 0);
    }
    base_.fences->Unref(r.fence);
    const CUdeviceptr va = r.va;
    *chunks = std::move(r.chunks);
    ranges_.erase(it);
    base_.counters->Add(base_.counters->range_reuses);
    return va;
  }
  if (unmapped == end) return 0;
  const CUdeviceptr va = unmapped->second.va;
  ranges_.erase(unmapped);
  return va;
}

std::size_t FreeRangeCache::Flush(bool all, FenceSweep* sweep) {
  FenceSweep own(base_.fences);
  if (sweep == nullptr) sweep = &own;
  // The mapped ranges to unmap once their fence completed; an intact one stays reusable as is
  // (unless `all`), and its fence is not even asked.
  std::vector<Range*> stale;
  std::vector<const Fence*> fences;
  for (auto& [span, r] : ranges_) {
    if (!r.mapped || (!all && base_.chunks->Intact(r.chunks, r.epochs))) continue;
    stale.push_back(&r);
    fences.push_back(r.fence);
  }
  sweep->Prime(fences);
  std::size_t n = 0;
  for (Range* r : stale) {
    if (!sweep->Done(r->fence)) continue;
    base_.vmm->Unmap(r->va, r->span);
    r->mapped = false;
    base_.fences->Unref(r->fence);
    r->fence = nullptr;
    r->chunks.clear();
    r->epochs.clear();
    ++n;
  }
  for (auto it = ranges_.begin(); ranges_.size() > kMaxFreeRanges && it != ranges_.end();) {
    if (it->second.mapped) {
      ++it;
      continue;
    }
    base_.vmm->FreeAddress(it->second.va, it->second.span);
    it = ranges_.erase(it);
  }
  return n;
}

void FreeRangeCache::Drop() {
  for (auto& [span, r] : ranges_) {
    if (r.mapped) base_.vmm->Unmap(r.va, r.span);
    base_.fences->Unref(r.fence);
    base_.vmm->FreeAddress(r.va, r.span);
  }
  ranges_.clear();
}

std::size_t FreeRangeCache::mapped() const {
  std::size_t n = 0;
  for (const auto& [span, r] : ranges_) n += r.mapped;
  return n;
}

}  // namespace chameleon::shim::swap
