// SwapEngine: program VMM — allocations at VA ranges the program reserved itself (docs/executor.md,
// "Program VMM"). The shim virtualises the program's cuMemCreate handles; mapping one makes the
// range an adopted allocation, swapped like any other, whose VA the engine never reserves or frees.
#include "swap/swap_engine.h"

namespace chameleon::shim::swap {

CUresult SwapEngine::Adopt(CUdeviceptr va, std::size_t bytes, AllocId* id,
                           std::atomic<std::uint32_t>* flags) {
  if (!side_) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == 0 || bytes % chunk_bytes_ != 0 || va % chunk_bytes_ != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(mu_);
  // The side stream waits on the fences of reused chunks: the program's first use of the range
  // may be on any stream, so consumers wait on `ready` (recorded after those waits) instead.
  AllocId new_id = 0;
  const CUresult r = MapNewLocked(va, bytes, bytes, side_, &new_id, nullptr);
  if (r != CUDA_SUCCESS) return r;
  Allocation* a = Get(new_id);
  a->adopted = true;
  a->last_stream = nullptr;  // the shim reports the real one (NoteUse / PrepareUse)
  if (Fence* f = fences_->Record(side_)) {
    if (fences_->Done(f)) {
      fences_->Unref(f);
    } else {
      a->ready = f;
      a->wait_counted = true;  // not a prefetch: no hit or miss to count
    }
  }
  a->flags = flags;
  MirrorFlags(a);
  if (id) *id = new_id;
  return CUDA_SUCCESS;
}

CUresult SwapEngine::Unadopt(AllocId id, bool keep) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a || !a->adopted) return CUDA_ERROR_INVALID_VALUE;
  // cuMemUnmap is synchronous: no copy of ours may still touch the range once it returns.
  for (Fence* f : {a->ready, a->out_done}) {
    if (f && !fences_->Done(f)) api_.event_synchronize(f->event);
  }
  fences_->Unref(a->ready);
  a->ready = nullptr;
  if (a->host_map != 0) {
    if (const CUresult r = HostUnmapLocked(a); r != CUDA_SUCCESS) return r;
  }
  if (a->state == Residency::kResident) {
    // The program's work on the range is complete (the unmap's synchronous semantics).
    if (a->mapped) Unmap(a->va, a->span);  // not when detached already (a release)
    a->mapped = false;
    if (keep) {
      // As the driver does: the handle keeps its physical memory (our chunks) until released.
      // Unmapped, it cannot be copied out, so it must not be evicted meanwhile.
      a->pinned = true;
    } else {
      chunks_->Release(a->chunks, nullptr, nullptr);  // reusable at once
      a->chunks.clear();
    }
  } else if (a->mapped) {
    UnmapNow(a);  // waits for the swap-out copy when it is still running
  }
  if (by_address_.count(a->va) && by_address_[a->va] == id) by_address_.erase(a->va);
  a->flags = nullptr;
  if (keep) return CUDA_SUCCESS;
  if (a->host) host_->Release(a->host, a->span);
  fences_->Unref(a->out_done);
  allocs_.erase(id);
  return CUDA_SUCCESS;
}

CUresult SwapEngine::Rebind(AllocId id, CUdeviceptr va, std::atomic<std::uint32_t>* flags) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a || !a->adopted || a->mapped || va % chunk_bytes_ != 0) return CUDA_ERROR_INVALID_VALUE;
  const CUdeviceptr old = a->va;
  a->va = va;
  // Mapping now (not at first use) makes the driver validate the range as the program's map
  // would have; a bad range leaves the allocation detached as before.
  CUresult r = CUDA_SUCCESS;
  if (a->state == Residency::kResident) {
    r = MapChunks(va, a->chunks);  // the chunks kept since the unmap, contents intact
    if (r == CUDA_SUCCESS) {
      a->mapped = true;
      a->pinned = false;
    }
  } else {
    r = FaultInLocked(a);
  }
  if (r != CUDA_SUCCESS) {
    a->va = old;
    return r;
  }
  by_address_[va] = id;
  a->flags = flags;
  MirrorFlags(a);
  return CUDA_SUCCESS;
}

CUresult SwapEngine::HostMapLocked(Allocation* a, CUstream stream) {
  // The stale mapping (chunks possibly serving someone else now) goes first; waits for the
  // swap-out copy only if it is still running.
  if (a->mapped) UnmapNow(a);
  // From now on the host mapping holds the contents (ops may write it): the old chunks must
  // never be reclaimed as if they still did.
  a->chunks.clear();
  a->epochs.clear();
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  counters_->Add(counters_->vmm_calls, 3);
  CUresult r = api_.mem_create(&h, a->span, &prop, 0);
  if (r != CUDA_SUCCESS) return r;  // no host VMM on this driver: the caller fails the op
  r = api_.mem_map(a->va, a->span, 0, h, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = options_.device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = api_.mem_set_access(a->va, a->span, &access, 1);
    if (r != CUDA_SUCCESS) Unmap(a->va, a->span);
  }
  if (r != CUDA_SUCCESS) {
    api_.mem_release(h);
    return r;
  }
  // The contents: after the swap-out copy that filled the host buffer.
  if (a->out_done && !fences_->Done(a->out_done)) {
    api_.stream_wait_event(side_, a->out_done->event, 0);
  }
  r = api_.memcpy_htod_async(a->va, a->host, a->bytes, side_);
  Fence* f = fences_->Record(side_);
  if (r != CUDA_SUCCESS || !f) {
    fences_->Unref(f);
    Unmap(a->va, a->span);
    api_.mem_release(h);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN;
  }
  api_.stream_wait_event(stream, f->event, 0);
  fences_->Unref(a->ready);
  a->ready = f;  // later consumers wait on it too (PrepareSpan)
  a->host_map = h;
  counters_->Add(counters_->swap_in_bytes, a->bytes);
  return CUDA_SUCCESS;
}

CUresult SwapEngine::HostUnmapLocked(Allocation* a) {
  // Ops may have written through the host mapping: copy the contents back to the host buffer
  // after everything that may still use it (its last stream, the copy that filled it), wait,
  // then unmap (a rare, counted stall: this page is now needed on the device).
  const std::uint64_t t0 = NowNs();
  if (Fence* last = a->last_stream ? fences_->Record(a->last_stream) : nullptr) {
    api_.stream_wait_event(out_, last->event, 0);
    fences_->Unref(last);
  }
  if (a->ready) {
    api_.stream_wait_event(out_, a->ready->event, 0);
    fences_->Unref(a->ready);
    a->ready = nullptr;
  }
  CUresult r = api_.memcpy_dtoh_async(a->host, a->va, a->bytes, out_);
  Fence* f = fences_->Record(out_);
  if (f) {
    const CUresult w = api_.event_synchronize(f->event);
    if (r == CUDA_SUCCESS) r = w;
    fences_->Unref(f);
  }
  if (r != CUDA_SUCCESS) return r;
  Unmap(a->va, a->span);
  counters_->Add(counters_->vmm_calls);
  api_.mem_release(a->host_map);
  a->host_map = 0;
  a->mapped = false;
  counters_->Add(counters_->swap_out_bytes, a->bytes);
  Stall(t0);
  return CUDA_SUCCESS;
}

CUresult SwapEngine::PrepareSpan(const AllocId* named, std::size_t n, const AllocId* reach,
                                 std::size_t m, CUstream stream) {
  std::lock_guard lock(mu_);
  const auto hold = [&](const AllocId* ids, std::size_t k, bool on) {
    for (std::size_t i = 0; i < k; ++i) {
      if (Allocation* a = Get(ids[i])) a->held = on;
    }
  };
  hold(named, n, true);
  hold(reach, m, true);
  CUresult result = CUDA_SUCCESS;
  for (int attempt = 0; attempt < 2; ++attempt) {
    result = CUDA_SUCCESS;
    for (std::size_t i = 0; i < n && result == CUDA_SUCCESS; ++i) {
      Allocation* a = Get(named[i]);
      if (!a) continue;
      if (a->state == Residency::kSwappedOut) {
        result = FaultInLocked(a);
      } else if (a->ready) {
        result = WaitResidentLocked(a, stream);
      }
      a->last_stream = stream;
    }
    if (result != CUDA_ERROR_OUT_OF_MEMORY || attempt == 1) break;
    // The named tensors do not fit beside the reached pages: those may go (to host memory,
    // below) — the op has not been launched, so nothing uses their stale mappings yet.
    hold(reach, m, false);
    hold(named, n, true);
  }
  for (std::size_t i = 0; i < m && result == CUDA_SUCCESS; ++i) {
    Allocation* a = Get(reach[i]);
    if (!a) continue;
    if (a->state == Residency::kResident) {
      if (a->ready) result = WaitResidentLocked(a, stream);
    } else if (a->host_map != 0) {
      if (a->ready) api_.stream_wait_event(stream, a->ready->event, 0);
    } else if (chunks_->pooled() + chunks_->room_bytes() / chunk_bytes_ >= a->span / chunk_bytes_) {
      result = FaultInLocked(a);  // fits without evicting anyone
    } else {
      result = HostMapLocked(a, stream);
    }
    a->last_stream = stream;
    MirrorFlags(a);
  }
  hold(named, n, false);
  hold(reach, m, false);
  return result;
}

}  // namespace chameleon::shim::swap
