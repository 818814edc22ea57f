// SwapEngine: the transfers (swap-out, swap-in, consumer waits, the synchronous safety net).
#include "swap/swap_engine.h"

#include <algorithm>

namespace chameleon::shim::swap {
namespace {

// Bytes per swap copy (at least one chunk). Smaller pieces overlap a swap-out with the swap-in
// that waits for its chunks more finely, at one more copy and event record per piece.
constexpr std::size_t kPieceBytes = 4u << 20;

}  // namespace

std::size_t SwapEngine::PieceChunks() const {
  return kPieceBytes > chunk_bytes_ ? kPieceBytes / chunk_bytes_ : 1;
}

Fence* SwapEngine::CopyOutLocked(Allocation* a, void* host, CUresult* result) {
  const std::size_t piece = PieceChunks();
  Fence* last = nullptr;
  a->epochs.clear();
  *result = CUDA_SUCCESS;
  for (std::size_t i = 0; i < a->chunks.size(); i += piece) {
    const std::size_t off = i * chunk_bytes_;
    const std::size_t n = std::min(piece * chunk_bytes_, a->bytes - off);
    *result = api_.memcpy_dtoh_async(static_cast<char*>(host) + off, a->va + off, n, out_);
    Fence* f = *result == CUDA_SUCCESS ? fences_->Record(out_) : nullptr;
    if (!f) {
      // Take the pieces already released back (nobody can have taken them: we hold the lock).
      std::vector<std::uint32_t> released(a->chunks.begin(), a->chunks.begin() + i);
      chunks_->Reclaim(released, a->epochs);
      fences_->Unref(last);
      if (*result == CUDA_SUCCESS) *result = CUDA_ERROR_UNKNOWN;
      return nullptr;
    }
    for (std::size_t j = i; j < std::min(i + piece, a->chunks.size()); ++j) {
      a->epochs.push_back(chunks_->ReleaseOne(a->chunks[j], f));
    }
    fences_->Unref(last);  // the chunks hold their own references
    last = f;
  }
  return last;
}

CUresult SwapEngine::CopyInLocked(Allocation* a, const std::vector<Fence*>& waits) {
  // The host copy is complete only once the swap-out copy (out stream) has finished. (A stale
  // range's forced unmap already waited for it; an unmapped range's fence had completed.)
  if (a->out_done && !fences_->Done(a->out_done)) {
    api_.stream_wait_event(side_, a->out_done->event, 0);
  }
  const std::size_t piece = PieceChunks();
  Fence* waited = nullptr;
  for (std::size_t i = 0; i < a->chunks.size(); i += piece) {
    // Each piece waits only for its own chunks' previous users (usually one swap-out piece).
    for (std::size_t j = i; j < std::min(i + piece, a->chunks.size()); ++j) {
      Fence* f = j < waits.size() ? waits[j] : nullptr;
      if (f && f != waited) api_.stream_wait_event(side_, f->event, 0);
      if (f) waited = f;
    }
    const std::size_t off = i * chunk_bytes_;
    const std::size_t n = std::min(piece * chunk_bytes_, a->bytes - off);
    const CUresult r =
        api_.memcpy_htod_async(a->va + off, static_cast<const char*>(a->host) + off, n, side_);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult SwapEngine::SwapOut(AllocId id, CUstream compute) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  const CUresult r = SwapOutLocked(a, compute);
  MirrorFlags(a);
  return r;
}

CUresult SwapEngine::SwapOutLocked(Allocation* a, CUstream compute) {
  if (a->state != Residency::kResident) return CUDA_SUCCESS;
  if (a->pinned) return CUDA_ERROR_NOT_PERMITTED;
  Fence* host_read = nullptr;
  void* host = host_->Acquire(a->span, &host_read);
  if (!host) {
    counters_->Add(counters_->host_pool_full);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // 1. Everything queued on the compute stream so far (the last use) precedes the copy.
  Fence* last_use = fences_->Record(compute);
  if (!last_use) {
    host_->Release(host, a->span, host_read);
    fences_->Unref(host_read);
    return CUDA_ERROR_UNKNOWN;
  }
  api_.stream_wait_event(out_, last_use->event, 0);
  fences_->Unref(last_use);  // the wait captured the event's state; it may be re-recorded
  // 2. The buffer may still be read by the swap-in that released it (on the in stream).
  if (host_read) {
    if (!fences_->Done(host_read)) api_.stream_wait_event(out_, host_read->event, 0);
    fences_->Unref(host_read);
  }
  // 3. A swap-in of this tensor nobody waited for may still be writing it (in stream).
  if (a->ready) {
    if (!fences_->Done(a->ready)) api_.stream_wait_event(out_, a->ready->event, 0);
    fences_->Unref(a->ready);
    a->ready = nullptr;
  }
  // 4. The copy out, piece by piece; each piece's chunks go to the pool with its own fence (the
  // next user waits on that), and out_done (the last) covers the whole copy.
  CUresult r = CUDA_SUCCESS;
  Fence* out_done = CopyOutLocked(a, host, &r);
  if (!out_done) {
    host_->Release(host, a->span);
    return r;
  }
  a->out_done = out_done;
  a->host = host;
  a->state = Residency::kSwappedOut;
  a->wait_counted = false;
  // 5. The VA keeps its (now stale) mappings until a FlushUnmaps after out_done.
  FencePool::Ref(out_done);
  pending_.push_back({a->id, a->va, a->span, out_done});
  counters_->Add(counters_->swap_out_bytes, a->bytes);
  return CUDA_SUCCESS;
}

CUresult SwapEngine::SwapIn(AllocId id) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  const CUresult r = SwapInLocked(a);
  MirrorFlags(a);
  return r;
}

void SwapEngine::FinishReclaimLocked(Allocation* a) {
  host_->Release(a->host, a->span, a->out_done);  // the copy out may still write it
  a->host = nullptr;
  a->ready = a->out_done;  // conservative: writers wait until the copy out has read them
  a->out_done = nullptr;
  a->state = Residency::kResident;
  a->wait_counted = false;
  counters_->Add(counters_->reclaims);
}

bool SwapEngine::RemapReclaimLocked(Allocation* a) {
  if (a->chunks.empty() || !chunks_->Reclaim(a->chunks, a->epochs)) return false;
  if (MapChunks(a->va, a->chunks) != CUDA_SUCCESS) {
    // Back to the pool as they were (same fence: the copy out may still read them).
    chunks_->Release(a->chunks, a->out_done, &a->epochs);
    return false;
  }
  a->mapped = true;
  counters_->Add(counters_->remap_reclaims);
  return true;
}

CUresult SwapEngine::SwapInLocked(Allocation* a, bool count_stall) {
  if (a->state == Residency::kResident) return CUDA_SUCCESS;
  if (a->host_map != 0) {  // program VMM spilled to host memory (swap_adopt.cc)
    if (const CUresult r = HostUnmapLocked(a); r != CUDA_SUCCESS) return r;
  }
  if (a->mapped) {
    // Still mapped to its old chunks. If nobody took them since, their contents are intact:
    // take them back, no copy, no VMM call.
    if (chunks_->Reclaim(a->chunks, a->epochs)) {
      for (std::size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].id != a->id) continue;
        fences_->Unref(pending_[i].fence);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      FinishReclaimLocked(a);
      return CUDA_SUCCESS;
    }
    // Some chunk serves someone else now: the stale mapping must go before we map new chunks.
    ForceUnmapLocked(a, count_stall);
  } else if (RemapReclaimLocked(a)) {
    // Unmapped by an earlier batch, but its chunks were not reused: map them again, no copy.
    FinishReclaimLocked(a);
    return CUDA_SUCCESS;
  }
  std::vector<std::uint32_t> fresh;
  std::vector<Fence*> waits;  // the chunks' pool fences: waited on per piece by CopyInLocked
  CUresult r =
      TakeChunks(static_cast<std::uint32_t>(a->span / chunk_bytes_), side_, a->id, &fresh, &waits);
  if (r != CUDA_SUCCESS) return r;
  r = MapChunks(a->va, fresh);
  if (r != CUDA_SUCCESS) {
    // Back to the pool with the fences they carried.
    for (std::size_t i = 0; i < fresh.size(); ++i) chunks_->ReleaseOne(fresh[i], waits[i]);
    for (Fence* f : waits) fences_->Unref(f);
    return r;
  }
  a->mapped = true;
  a->chunks = std::move(fresh);
  a->epochs.clear();
  r = CopyInLocked(a, waits);
  for (Fence* f : waits) fences_->Unref(f);
  a->ready = fences_->Record(side_);
  // The next swap-out writing this buffer waits for `ready` (the read above) on its stream.
  host_->Release(a->host, a->span, a->ready);
  a->host = nullptr;
  fences_->Unref(a->out_done);
  a->out_done = nullptr;
  a->state = Residency::kResident;
  a->wait_counted = false;
  counters_->Add(counters_->swap_in_bytes, a->bytes);
  return r;
}

CUresult SwapEngine::WaitResident(AllocId id, CUstream consumer) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  return WaitResidentLocked(a, consumer);
}

CUresult SwapEngine::WaitResidentLocked(Allocation* a, CUstream consumer) {
  a->last_stream = consumer;
  CUresult r = CUDA_SUCCESS;
  if (a->state == Residency::kSwappedOut) r = SwapInLocked(a);
  if (r == CUDA_SUCCESS && a->ready) {
    const bool done = fences_->Done(a->ready);
    if (!a->wait_counted) {
      counters_->Add(done ? counters_->prefetch_hits : counters_->prefetch_misses);
      a->wait_counted = true;
    }
    if (done) {
      fences_->Unref(a->ready);
      a->ready = nullptr;
    } else if (!options_.skip_swap_in_wait) {
      r = api_.stream_wait_event(consumer, a->ready->event, 0);
    }
  }
  MirrorFlags(a);
  return r;
}

CUresult SwapEngine::FaultIn(AllocId id) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  return FaultInLocked(a);
}

CUresult SwapEngine::FaultInLocked(Allocation* a) {
  if (a->state == Residency::kResident && !a->ready) return CUDA_SUCCESS;
  const std::uint64_t t0 = NowNs();
  CUresult r = SwapInLocked(a, /*count_stall=*/false);
  if (r == CUDA_SUCCESS && a->ready && !options_.skip_swap_in_wait) {
    r = api_.event_synchronize(a->ready->event);
    fences_->Unref(a->ready);
    a->ready = nullptr;
  }
  counters_->Add(counters_->fault_ins);
  Stall(t0);
  MirrorFlags(a);
  return r;
}

CUresult SwapEngine::PrepareUse(const AllocId* ids, std::size_t n, CUstream stream) {
  std::lock_guard lock(mu_);
  // Hold them all first: bringing one back must not evict another this op needs.
  for (std::size_t i = 0; i < n; ++i) {
    if (Allocation* a = Get(ids[i])) a->held = true;
  }
  CUresult result = CUDA_SUCCESS;
  for (std::size_t i = 0; i < n; ++i) {
    Allocation* a = Get(ids[i]);
    if (!a) continue;
    CUresult r = CUDA_SUCCESS;
    if (a->state == Residency::kSwappedOut) {
      r = FaultInLocked(a);
    } else if (a->ready) {
      r = WaitResidentLocked(a, stream);
    }
    a->last_stream = stream;
    if (r != CUDA_SUCCESS && result == CUDA_SUCCESS) result = r;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (Allocation* a = Get(ids[i])) a->held = false;
  }
  return result;
}

}  // namespace chameleon::shim::swap
