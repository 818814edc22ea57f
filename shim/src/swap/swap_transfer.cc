// SwapEngine: the transfers (swap-out, swap-in, consumer waits, the synchronous safety net).
#include "swap/swap_engine.h"

namespace chameleon::shim::swap {

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
  void* host = host_->Acquire(a->span);
  if (!host) {
    counters_->Add(counters_->host_pool_full);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // 1. Everything queued on the compute stream so far (the last use) precedes the copy.
  Fence* last_use = fences_->Record(compute);
  if (!last_use) {
    host_->Release(host, a->span);
    return CUDA_ERROR_UNKNOWN;
  }
  api_.stream_wait_event(side_, last_use->event, 0);
  fences_->Unref(last_use);  // the wait captured the event's state; it may be re-recorded
  // A previous swap-in's HtoD is earlier on the side stream: no wait needed for it.
  fences_->Unref(a->ready);
  a->ready = nullptr;
  // 2. The copy out, then the fence the chunks' next user will wait on.
  CUresult r = api_.memcpy_dtoh_async(host, a->va, a->bytes, side_);
  Fence* out_done = r == CUDA_SUCCESS ? fences_->Record(side_) : nullptr;
  if (!out_done) {
    host_->Release(host, a->span);
    return r == CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : r;
  }
  chunks_->Release(a->chunks, out_done, &a->epochs);
  a->out_done = out_done;
  a->host = host;
  a->state = Residency::kSwappedOut;
  a->wait_counted = false;
  // 3. The VA keeps its (now stale) mappings until a FlushUnmaps after out_done.
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

CUresult SwapEngine::SwapInLocked(Allocation* a, bool count_stall) {
  if (a->state == Residency::kResident) return CUDA_SUCCESS;
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
      host_->Release(a->host, a->span);
      a->host = nullptr;
      a->ready = a->out_done;  // conservative: writers wait until the copy out has read them
      a->out_done = nullptr;
      a->state = Residency::kResident;
      a->wait_counted = false;
      counters_->Add(counters_->reclaims);
      return CUDA_SUCCESS;
    }
    // Some chunk serves someone else now: the stale mapping must go before we map new chunks.
    // A stall only if the swap-out copy was still running (simgpu's cuMemUnmap additionally
    // synchronises the device, which its virtual clock accounts for).
    const std::uint64_t t0 = NowNs();
    if (UnmapNow(a) && count_stall) Stall(t0);
    counters_->Add(counters_->forced_unmaps);
  }
  std::vector<std::uint32_t> fresh;
  CUresult r = TakeChunks(static_cast<std::uint32_t>(a->span / chunk_bytes_), side_, a->id, &fresh);
  if (r != CUDA_SUCCESS) return r;
  r = MapChunks(a->va, fresh);
  if (r != CUDA_SUCCESS) {
    chunks_->Release(fresh, nullptr, nullptr);
    return r;
  }
  a->mapped = true;
  a->chunks = std::move(fresh);
  a->epochs.clear();
  // The swap-out copy that filled the host buffer is earlier on the side stream.
  r = api_.memcpy_htod_async(a->va, a->host, a->bytes, side_);
  a->ready = fences_->Record(side_);
  host_->Release(a->host, a->span);  // reuse is a later side-stream copy: ordered after this one
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
