#include "swap/evictor.h"

#include <algorithm>

namespace chameleon::shim::swap {

Allocation* Evictor::PickClosest(std::size_t bytes, AllocId exclude) const {
  Allocation* best = nullptr;
  std::size_t best_diff = 0;
  table_->ForEach([&](Allocation& a) {
    if (a.id == exclude || a.pinned || a.held || a.state != Residency::kResident) return;
    const std::size_t diff = a.bytes > bytes ? a.bytes - bytes : bytes - a.bytes;
    if (!best || diff < best_diff || (diff == best_diff && a.id < best->id)) {
      best = &a;
      best_diff = diff;
    }
  });
  return best;
}

Allocation* Evictor::PickFarthest(std::size_t bytes, AllocId exclude) const {
  const std::uint32_t now = now_->load(std::memory_order_relaxed);
  Allocation* best = nullptr;
  std::uint64_t best_next = 0;
  std::size_t best_diff = 0;
  table_->ForEach([&](Allocation& a) {
    if (a.id == exclude || a.pinned || a.held || a.state != Residency::kResident) return;
    // kUnknown (no use left, or no record) is the largest value: such tensors go first.
    const std::uint64_t next = history_->NextUse(a.id, now);
    const std::size_t diff = a.bytes > bytes ? a.bytes - bytes : bytes - a.bytes;
    const bool better =
        !best || next > best_next ||
        (next == best_next && (diff < best_diff || (diff == best_diff && a.id < best->id)));
    if (better) {
      best = &a;
      best_next = next;
      best_diff = diff;
    }
  });
  return best;
}

Allocation* Evictor::Pick(std::size_t bytes, AllocId exclude) const {
  if (history_ != nullptr && history_->known()) return PickFarthest(bytes, exclude);
  return PickClosest(bytes, exclude);
}

void Evictor::RequestReclaim(std::uint64_t bytes) {
  const std::uint64_t lent = lent_ ? lent_->load(std::memory_order_relaxed) : 0;
  if (lent == 0) return;
  // The largest shortfall since the daemon last answered, at most what it lent: a level, not a
  // sum, since the same shortfall evicts again and again until the memory comes back.
  std::atomic<std::uint64_t>& request = base_.counters->reclaim_request_bytes;
  const std::uint64_t want = std::min(lent, std::max(bytes, SwapCounters::Get(request)));
  request.store(want, std::memory_order_relaxed);
}

bool Evictor::EvictClosest(std::size_t bytes, AllocId exclude) {
  RequestReclaim(bytes);
  Allocation* best = Pick(bytes, exclude);
  if (!best || transfers_->SwapOut(best, best->last_stream) != CUDA_SUCCESS) return false;
  MirrorFlags(*best);
  base_.counters->Add(base_.counters->evictions);
  return true;
}

CUresult Evictor::TakeChunks(std::uint32_t n, CUstream wait_stream, AllocId exclude,
                             std::vector<std::uint32_t>* out, std::vector<Fence*>* fences) {
  for (;;) {
    const CUresult r = base_.chunks->Take(n, wait_stream, out, fences);
    if (r == CUDA_SUCCESS) return r;
    // Freed chunks pool up without an eviction; only then do we evict (no host wait either way:
    // the taker's stream waits on the victim's swap-out fence).
    if (!EvictClosest(static_cast<std::size_t>(n) * base_.chunks->chunk_bytes(), exclude)) {
      return r;
    }
  }
}

bool Evictor::MakeRoom(std::uint64_t bytes) {
  const auto fits = [&] { return base_.chunks->room_bytes() >= bytes; };
  if (fits()) return true;
  Trim(bytes - base_.chunks->room_bytes());
  if (fits()) return true;
  DrainAndTrim();
  // Each eviction puts the victim's chunks in the pool; draining lets them go to the driver.
  while (!fits() && EvictClosest(bytes, 0)) DrainAndTrim();
  return fits();
}

bool Evictor::ReleaseBytes(std::uint64_t bytes) {
  std::uint64_t released = Trim(bytes);
  if (released < bytes) released += DrainAndTrim();
  while (released < bytes && EvictClosest(bytes, 0)) released += DrainAndTrim();
  return released > 0;
}

std::uint64_t Evictor::Trim(std::uint64_t want) {
  // A passed-through allocation under pressure needs a few MB: on a 1F1B pipeline (Llama 2 7B
  // S4096, four stages in one process) three such trims a step, each unmapping every stale range
  // first, made three device synchronisations a step, each of which drains all four stages'
  // queues (simgpu's unmap waits for every device). Chunks no range maps any more need no unmap.
  const std::uint64_t unmapped = base_.chunks->TrimUnmapped(want);
  if (unmapped >= want) return unmapped;
  // A pooled chunk may still be mapped at the stale VA of a swapped-out or freed range, and the
  // driver frees a released chunk only once its last mapping goes: unmap first what can go (the
  // same fences guard both), so the chunks Trim releases really return their memory.
  unmaps_->Flush(/*all=*/false);
  if (free_ranges_->Flush(/*all=*/true) > 0) base_.counters->Add(base_.counters->device_syncs);
  if (want == UINT64_MAX) return unmapped + base_.chunks->Trim();
  // Only what was asked for. Releasing every idle chunk here emptied the pool for a few MB: GPT-2
  // XL at 0.75 of its peak under the daemon sometimes lost ~5 GB of pooled chunks at each
  // passed-through allocation, then created 2,434 chunks an iteration again (cuMemCreate on the
  // allocation's stream: 224 ms of allocation waits, 0.528 s a step against 0.367), and whether
  // it did hung on which fences had completed, i.e. on the host's timing (session 22).
  return unmapped + base_.chunks->TrimUnmapped(want - unmapped);
}

std::uint64_t Evictor::DrainAndTrim() {
  // Idle chunks whose last user is still running, or still mapped at a stale VA (a released
  // chunk's memory only goes when its last mapping does): wait for all of it once.
  const std::uint64_t t0 = NowNs();
  transfers_->SyncStreams();
  base_.counters->Add(base_.counters->device_syncs);
  unmaps_->Flush(/*all=*/true);
  CountStall(base_.counters, t0);
  return Trim();
}

}  // namespace chameleon::shim::swap
