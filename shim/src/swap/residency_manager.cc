#include "swap/residency_manager.h"

#include <vector>

#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

bool ResidencyManager::RemapReclaim(Allocation* a) {
  if (a->chunks.empty() || !base_.chunks->Reclaim(a->chunks, a->epochs)) return false;
  if (base_.vmm->Map(a->va, a->chunks) != CUDA_SUCCESS) {
    // Back to the pool as they were (same fence: the copy out may still read them).
    base_.chunks->Release(a->chunks, a->out_done, &a->epochs);
    return false;
  }
  a->mapped = true;
  base_.counters->Add(base_.counters->remap_reclaims);
  return true;
}

CUresult ResidencyManager::SwapIn(Allocation* a, bool count_stall) {
  if (a->state == Residency::kResident) return CUDA_SUCCESS;
  if (a->host_map != 0) {  // program VMM spilled to host memory (HostMapper)
    if (const CUresult r = host_maps_->Unmap(a); r != CUDA_SUCCESS) return r;
  }
  if (a->mapped) {
    // Still mapped to its old chunks. If nobody took them since, their contents are intact:
    // take them back, no copy, no VMM call.
    if (base_.chunks->Reclaim(a->chunks, a->epochs)) {
      unmaps_->Cancel(a->id);
      transfers_->FinishReclaim(a);
      return CUDA_SUCCESS;
    }
    // Some chunk serves someone else now: the stale mapping must go before we map new chunks.
    unmaps_->ForceUnmap(a, count_stall);
  } else if (RemapReclaim(a)) {
    // Unmapped by an earlier batch, but its chunks were not reused: map them again, no copy.
    transfers_->FinishReclaim(a);
    return CUDA_SUCCESS;
  }
  std::vector<std::uint32_t> fresh;
  std::vector<Fence*> waits;  // the chunks' pool fences: waited on per piece by the copy
  const auto n = static_cast<std::uint32_t>(a->span / base_.chunks->chunk_bytes());
  CUresult r = evictor_->TakeChunks(n, transfers_->in_stream(), a->id, &fresh, &waits);
  if (r != CUDA_SUCCESS) return r;
  r = base_.vmm->Map(a->va, fresh);
  if (r != CUDA_SUCCESS) {
    // Back to the pool with the fences they carried.
    for (std::size_t i = 0; i < fresh.size(); ++i) base_.chunks->ReleaseOne(fresh[i], waits[i]);
    for (Fence* f : waits) base_.fences->Unref(f);
    return r;
  }
  a->mapped = true;
  a->chunks = std::move(fresh);
  a->epochs.clear();
  return transfers_->SwapIn(a, waits);
}

void ResidencyManager::CountFaultInWait(const Allocation& a, CUstream consumer) {
  // The host waits for the copy, so nothing more is launched until it ends: the consumer
  // stream idles from where its queue ends (virtual time) to the copy's end. simgpu only.
  const DriverApi& api = *base_.api;
  std::uint64_t ready_ns = 0, arrive_ns = 0;
  if (api.event_virtual_ns != nullptr && api.stream_virtual_ns != nullptr &&
      api.event_virtual_ns(a.ready->event, &ready_ns) == CUDA_SUCCESS &&
      api.stream_virtual_ns(consumer, &arrive_ns) == CUDA_SUCCESS && ready_ns > arrive_ns) {
    base_.counters->Add(base_.counters->fault_in_wait_ns, ready_ns - arrive_ns);
  }
}

void ResidencyManager::CountWait(const Allocation& a, CUstream consumer, bool ahead) {
  SwapCounters* c = base_.counters;
  c->Add(ahead ? c->prefetches : c->late_swap_ins);
  const DriverApi& api = *base_.api;
  std::uint64_t ready_ns = 0, arrive_ns = 0;
  bool hit = false;
  if (api.event_virtual_ns != nullptr && api.stream_virtual_ns != nullptr &&
      api.event_virtual_ns(a.ready->event, &ready_ns) == CUDA_SUCCESS &&
      api.stream_virtual_ns(consumer, &arrive_ns) == CUDA_SUCCESS) {
    // Stream order and virtual time: the consumer's next op starts at arrive_ns; the copy's
    // last piece ends at ready_ns. Deterministic: both are fixed when the work is submitted.
    const std::uint64_t wait = ready_ns > arrive_ns ? ready_ns - arrive_ns : 0;
    c->Add(c->swap_in_wait_ns, wait);
    hit = wait == 0;
  } else {
    // A real device: the copy has really finished when the consumer is enqueued (conservative:
    // the consumer itself starts later still).
    hit = base_.fences->Done(a.ready);
  }
  c->Add(hit ? c->prefetch_hits : c->prefetch_misses);
}

CUresult ResidencyManager::WaitResident(Allocation* a, CUstream consumer) {
  a->last_stream = consumer;
  CUresult r = CUDA_SUCCESS;
  const bool ahead = a->state != Residency::kSwappedOut;
  if (!ahead) r = SwapIn(a);
  if (r == CUDA_SUCCESS && a->ready) {
    if (!a->wait_counted) {
      CountWait(*a, consumer, ahead);
      a->wait_counted = true;
    }
    // Always a stream wait, never a host query: cuEventQuery observing completion moves
    // simgpu's host clock to the copy's end (a hidden host wait), so whether the worker thread
    // had run would leak into virtual time. The wait orders the consumer's stream, and through
    // its last use every later swap-out or free, after the copy: the fence is no longer needed.
    if (!skip_swap_in_wait_) {
      r = base_.api->stream_wait_event(consumer, a->ready->event, 0);
      base_.fences->Unref(a->ready);
      a->ready = nullptr;
    }
  }
  MirrorFlags(*a);
  return r;
}

CUresult ResidencyManager::FaultIn(Allocation* a, CUstream consumer) {
  if (a->state == Residency::kResident && !a->ready) return CUDA_SUCCESS;
  const std::uint64_t t0 = NowNs();
  CUresult r = SwapIn(a, /*count_stall=*/false);
  if (r == CUDA_SUCCESS && a->ready && !skip_swap_in_wait_) {
    CountFaultInWait(*a, consumer != nullptr ? consumer : a->last_stream);
    r = base_.api->event_synchronize(a->ready->event);
    base_.fences->Unref(a->ready);
    a->ready = nullptr;
  }
  base_.counters->Add(base_.counters->fault_ins);
  CountStall(base_.counters, t0);
  MirrorFlags(*a);
  return r;
}

void ResidencyManager::Hold(const AllocId* ids, std::size_t k, bool on) {
  for (std::size_t i = 0; i < k; ++i) {
    if (Allocation* a = table_->Get(ids[i])) a->held = on;
  }
}

CUresult ResidencyManager::PrepareNamed(Allocation* a, CUstream stream) {
  CUresult r = CUDA_SUCCESS;
  if (a->state == Residency::kSwappedOut) {
    r = FaultIn(a, stream);
  } else if (a->ready) {
    r = WaitResident(a, stream);
  }
  a->last_stream = stream;
  return r;
}

CUresult ResidencyManager::PrepareUse(const AllocId* ids, std::size_t n, CUstream stream) {
  // Hold them all first: bringing one back must not evict another this op needs.
  Hold(ids, n, true);
  CUresult result = CUDA_SUCCESS;
  for (std::size_t i = 0; i < n; ++i) {
    Allocation* a = table_->Get(ids[i]);
    if (!a) continue;
    const CUresult r = PrepareNamed(a, stream);
    if (r != CUDA_SUCCESS && result == CUDA_SUCCESS) result = r;
  }
  Hold(ids, n, false);
  return result;
}

CUresult ResidencyManager::PrepareSpan(const AllocId* named, std::size_t n, const AllocId* reach,
                                       std::size_t m, CUstream stream) {
  Hold(named, n, true);
  Hold(reach, m, true);
  CUresult result = CUDA_SUCCESS;
  for (int attempt = 0; attempt < 2; ++attempt) {
    result = CUDA_SUCCESS;
    for (std::size_t i = 0; i < n && result == CUDA_SUCCESS; ++i) {
      if (Allocation* a = table_->Get(named[i])) result = PrepareNamed(a, stream);
    }
    if (result != CUDA_ERROR_OUT_OF_MEMORY || attempt == 1) break;
    // The named tensors do not fit beside the reached pages: those may go (to host memory,
    // below) — the op has not been launched, so nothing uses their stale mappings yet.
    Hold(reach, m, false);
    Hold(named, n, true);
  }
  const std::size_t chunk = base_.chunks->chunk_bytes();
  for (std::size_t i = 0; i < m && result == CUDA_SUCCESS; ++i) {
    Allocation* a = table_->Get(reach[i]);
    if (!a) continue;
    if (a->state == Residency::kResident) {
      if (a->ready) result = WaitResident(a, stream);
    } else if (a->host_map != 0) {
      if (a->ready) base_.api->stream_wait_event(stream, a->ready->event, 0);
    } else if (base_.chunks->pooled() + base_.chunks->room_bytes() / chunk >= a->span / chunk) {
      result = FaultIn(a, stream);  // fits without evicting anyone
    } else {
      result = host_maps_->Map(a, stream);
    }
    a->last_stream = stream;
    MirrorFlags(*a);
  }
  Hold(named, n, false);
  Hold(reach, m, false);
  return result;
}

}  // namespace chameleon::shim::swap
