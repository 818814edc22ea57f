#include "swap/allocator.h"

#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

CUresult Allocator::Allocate(std::size_t bytes, CUstream stream, CUdeviceptr* ptr, AllocId* id,
                             std::atomic<std::uint32_t>* flags) {
  const std::size_t chunk = base_.chunks->chunk_bytes();
  const std::size_t span = (bytes + chunk - 1) / chunk * chunk;
  std::vector<std::uint32_t> chunks;
  CUdeviceptr va = free_ranges_->Reuse(span, stream, &chunks);
  if (va != 0 && !chunks.empty()) {  // still mapped to its intact chunks: nothing to map
    // The freed tensor's bytes are dead; `stream` already waits for its free.
    discard_.StaleChunks(va, chunks, 0, chunks.size(), stream);
    Track(va, bytes, span, std::move(chunks), stream, id, flags);
    *ptr = va;
    return CUDA_SUCCESS;
  }
  CUresult r = CUDA_SUCCESS;
  if (va == 0) {
    r = base_.vmm->Reserve(&va, span);
    if (r != CUDA_SUCCESS) return r;
  }
  r = MapNew(va, bytes, span, stream, id, flags);
  if (r != CUDA_SUCCESS) {
    base_.vmm->FreeAddress(va, span);
    return r;
  }
  *ptr = va;
  return CUDA_SUCCESS;
}

CUresult Allocator::MapNew(CUdeviceptr va, std::size_t bytes, std::size_t span, CUstream stream,
                           AllocId* id, std::atomic<std::uint32_t>* flags) {
  std::vector<std::uint32_t> chunks;
  const auto n = static_cast<std::uint32_t>(span / base_.chunks->chunk_bytes());
  CUresult r = evictor_->TakeChunks(n, stream, 0, &chunks);
  if (r == CUDA_SUCCESS) {
    r = base_.vmm->Map(va, chunks);
    if (r != CUDA_SUCCESS) base_.chunks->Release(chunks, nullptr, nullptr);
  }
  if (r != CUDA_SUCCESS) return r;
  // Reused chunks hold dead bytes of their previous owners (`stream` waits for those).
  discard_.StaleChunks(va, chunks, 0, chunks.size(), stream);
  Track(va, bytes, span, std::move(chunks), stream, id, flags);
  return CUDA_SUCCESS;
}

Allocation* Allocator::Track(CUdeviceptr va, std::size_t bytes, std::size_t span,
                             std::vector<std::uint32_t> chunks, CUstream stream, AllocId* id,
                             std::atomic<std::uint32_t>* flags) {
  Allocation* a = table_->Add(va, bytes, span);
  a->chunks = std::move(chunks);
  a->last_stream = stream;
  a->flags = flags;
  MirrorFlags(*a);
  if (id) *id = a->id;
  return a;
}

CUresult Allocator::Free(AllocId id, CUstream stream) {
  Allocation* a = table_->Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  FencePool* fences = base_.fences;
  if (a->state == Residency::kResident) {
    // Stream-ordered: the next user of these chunks waits until `stream` passed the free.
    Fence* f = fences->Record(stream);
    if (f && a->ready && !fences->Done(a->ready)) {
      // A swap-in nobody waited for may still be writing the chunks (or, after a reclaim, the
      // swap-out copy still reading them, on the out stream): order the fence after both.
      const CUstream in = transfers_->in_stream();
      base_.api->stream_wait_event(in, f->event, 0);
      base_.api->stream_wait_event(in, a->ready->event, 0);
      fences->Unref(f);
      f = fences->Record(in);
    }
    if (a->adopted) {
      base_.chunks->Release(a->chunks, f, nullptr);
      unmaps_->Defer(0, a->va, a->span, f);  // takes Record's reference
    } else {
      // Releases the chunks; takes Record's reference.
      free_ranges_->Cache(a->va, a->span, std::move(a->chunks), f);
    }
  } else {
    // The copy is dropped. Its buffer may still be the target of the in-flight swap-out copy:
    // the next writer is a swap-out (same out stream, ordered after it), and freeing the buffer
    // to the driver waits for the fence.
    transfers_->ReleaseCopy(a, a->out_done);
    // Unmap (when the copy is done) then release the VA, or release it now.
    if (!unmaps_->Orphan(id)) base_.vmm->FreeAddress(a->va, a->span);
  }
  fences->Unref(a->ready);
  fences->Unref(a->out_done);
  table_->Unindex(a->va);
  table_->Erase(id);
  return CUDA_SUCCESS;
}

}  // namespace chameleon::shim::swap
