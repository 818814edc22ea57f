#include "swap/adopted_ranges.h"

#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

CUresult AdoptedRanges::Adopt(CUdeviceptr va, std::size_t bytes, AllocId* id,
                              std::atomic<std::uint32_t>* flags) {
  // The in stream waits on the fences of reused chunks: the program's first use of the range
  // may be on any stream, so consumers wait on `ready` (recorded after those waits) instead.
  const CUstream in = transfers_->in_stream();
  AllocId new_id = 0;
  const CUresult r = allocator_->MapNew(va, bytes, bytes, in, &new_id, nullptr);
  if (r != CUDA_SUCCESS) return r;
  Allocation* a = table_->Get(new_id);
  a->adopted = true;
  a->last_stream = nullptr;  // the shim reports the real one (NoteUse / PrepareUse)
  if (Fence* f = base_.fences->Record(in)) {
    if (base_.fences->Done(f)) {
      base_.fences->Unref(f);
    } else {
      a->ready = f;
      a->wait_counted = true;  // not a prefetch: no hit or miss to count
    }
  }
  a->flags = flags;
  MirrorFlags(*a);
  if (id) *id = new_id;
  return CUDA_SUCCESS;
}

CUresult AdoptedRanges::Unadopt(AllocId id, bool keep) {
  Allocation* a = table_->Get(id);
  if (!a || !a->adopted) return CUDA_ERROR_INVALID_VALUE;
  FencePool* fences = base_.fences;
  // cuMemUnmap is synchronous: no copy of ours may still touch the range once it returns.
  for (Fence* f : {a->ready, a->out_done}) {
    if (f && !fences->Done(f)) base_.api->event_synchronize(f->event);
  }
  fences->Unref(a->ready);
  a->ready = nullptr;
  if (a->host_map != 0) {
    if (const CUresult r = host_maps_->Unmap(a); r != CUDA_SUCCESS) return r;
  }
  if (a->state == Residency::kResident) {
    // The program's work on the range is complete (the unmap's synchronous semantics).
    if (a->mapped) base_.vmm->Unmap(a->va, a->span);  // not when detached already (a release)
    a->mapped = false;
    if (keep) {
      // As the driver does: the handle keeps its physical memory (our chunks) until released.
      // Unmapped, it cannot be copied out, so it must not be evicted meanwhile.
      a->pinned = true;
    } else {
      base_.chunks->Release(a->chunks, nullptr, nullptr);  // reusable at once
      a->chunks.clear();
    }
  } else if (a->mapped) {
    unmaps_->UnmapNow(a);  // waits for the swap-out copy when it is still running
  }
  table_->UnindexIf(a->va, id);
  a->flags = nullptr;
  if (keep) return CUDA_SUCCESS;
  transfers_->ReleaseCopy(a);
  fences->Unref(a->out_done);
  table_->Erase(id);
  return CUDA_SUCCESS;
}

CUresult AdoptedRanges::Rebind(AllocId id, CUdeviceptr va, std::atomic<std::uint32_t>* flags) {
  Allocation* a = table_->Get(id);
  if (!a || !a->adopted || a->mapped || va % base_.chunks->chunk_bytes() != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUdeviceptr old = a->va;
  a->va = va;
  // Mapping now (not at first use) makes the driver validate the range as the program's map
  // would have; a bad range leaves the allocation detached as before.
  CUresult r = CUDA_SUCCESS;
  if (a->state == Residency::kResident) {
    r = base_.vmm->Map(va, a->chunks);  // the chunks kept since the unmap, contents intact
    if (r == CUDA_SUCCESS) {
      a->mapped = true;
      a->pinned = false;
    }
  } else {
    r = residency_->FaultIn(a);
  }
  if (r != CUDA_SUCCESS) {
    a->va = old;
    return r;
  }
  table_->Index(va, id);
  a->flags = flags;
  MirrorFlags(*a);
  return CUDA_SUCCESS;
}

}  // namespace chameleon::shim::swap
