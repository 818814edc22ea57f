#include "swap/transfer_scheduler.h"

#include <algorithm>

namespace chameleon::shim::swap {
namespace {

// Bytes per swap copy (at least one chunk). Smaller pieces overlap a swap-out with the swap-in
// that waits for its chunks more finely, at one more copy and event record per piece.
constexpr std::size_t kPieceBytes = 4u << 20;

}  // namespace

std::size_t TransferScheduler::PieceChunks() const {
  const std::size_t chunk = base_.chunks->chunk_bytes();
  return kPieceBytes > chunk ? kPieceBytes / chunk : 1;
}

CUresult TransferScheduler::CopyOutPiece(void* dst, CUdeviceptr src, std::size_t n, bool remote) {
  if (remote) return base_.api->memcpy_dtod_async(reinterpret_cast<CUdeviceptr>(dst), src, n, out_);
  return base_.api->memcpy_dtoh_async(dst, src, n, out_);
}

CUresult TransferScheduler::CopyInPiece(CUdeviceptr dst, const void* src, std::size_t n,
                                        bool remote) {
  if (remote) return base_.api->memcpy_dtod_async(dst, reinterpret_cast<CUdeviceptr>(src), n, in_);
  return base_.api->memcpy_htod_async(dst, src, n, in_);
}

Fence* TransferScheduler::CopyOut(Allocation* a, void* host, Placement where, CUresult* result) {
  const std::size_t piece = PieceChunks();
  const std::size_t chunk = base_.chunks->chunk_bytes();
  Fence* last = nullptr;
  a->epochs.clear();
  *result = CUDA_SUCCESS;
  for (std::size_t i = 0; i < a->chunks.size(); i += piece) {
    const std::size_t off = i * chunk;
    const std::size_t n = std::min(piece * chunk, a->bytes - off);
    *result = CopyOutPiece(static_cast<char*>(host) + off, a->va + off, n, !where.host());
    Fence* f = *result == CUDA_SUCCESS ? base_.fences->Record(out_) : nullptr;
    if (!f) {
      // Take the pieces already released back (nobody can have taken them: we hold the lock).
      std::vector<std::uint32_t> released(a->chunks.begin(), a->chunks.begin() + i);
      base_.chunks->Reclaim(released, a->epochs);
      base_.fences->Unref(last);
      if (*result == CUDA_SUCCESS) *result = CUDA_ERROR_UNKNOWN;
      return nullptr;
    }
    for (std::size_t j = i; j < std::min(i + piece, a->chunks.size()); ++j) {
      a->epochs.push_back(base_.chunks->ReleaseOne(a->chunks[j], f));
    }
    base_.fences->Unref(last);  // the chunks hold their own references
    last = f;
  }
  return last;
}

CUresult TransferScheduler::CopyIn(Allocation* a, const std::vector<Fence*>& waits) {
  // The host copy is complete only once the swap-out copy (out stream) has finished. (A stale
  // range's forced unmap already waited for it; an unmapped range's fence had completed.)
  if (a->out_done && !base_.fences->Done(a->out_done)) {
    base_.api->stream_wait_event(in_, a->out_done->event, 0);
  }
  const std::size_t piece = PieceChunks();
  const std::size_t chunk = base_.chunks->chunk_bytes();
  Fence* waited = nullptr;
  for (std::size_t i = 0; i < a->chunks.size(); i += piece) {
    // Each piece waits only for its own chunks' previous users (usually one swap-out piece).
    for (std::size_t j = i; j < std::min(i + piece, a->chunks.size()); ++j) {
      Fence* f = j < waits.size() ? waits[j] : nullptr;
      if (f && f != waited) base_.api->stream_wait_event(in_, f->event, 0);
      if (f) waited = f;
    }
    // The piece's reused chunks held someone else's bytes. The copy below overwrites every chunk
    // it covers whole; only a last chunk that the tensor fills in part keeps a stale tail past
    // a->bytes, which is dropped (after its previous users, before the copy) so that it is not
    // kept, nor copied later.
    const std::size_t off = i * chunk;
    const std::size_t n = std::min(piece * chunk, a->bytes - off);
    const std::size_t whole = n / chunk;
    discard_.Overwritten(a->chunks, i, whole);
    discard_.StaleChunks(a->va, a->chunks, i + whole, piece - whole, in_);
    const CUresult r =
        CopyInPiece(a->va + off, static_cast<const char*>(a->host) + off, n, !a->where.host());
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult TransferScheduler::SwapOut(Allocation* a, CUstream compute, Placement want) {
  if (a->state != Residency::kResident) return CUDA_SUCCESS;
  if (a->pinned) return CUDA_ERROR_NOT_PERMITTED;
  Fence* host_read = nullptr;
  Placement where;
  void* host = destinations_->Acquire(want, a->span, &host_read, &where);
  if (!host) {
    base_.counters->Add(base_.counters->host_pool_full);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // 1. Everything queued on the compute stream so far (the last use) precedes the copy.
  Fence* last_use = base_.fences->Record(compute);
  if (!last_use) {
    destinations_->Release(host, a->span, where, host_read);
    base_.fences->Unref(host_read);
    return CUDA_ERROR_UNKNOWN;
  }
  base_.api->stream_wait_event(out_, last_use->event, 0);
  base_.fences->Unref(last_use);  // the wait captured the event's state; it may be re-recorded
  // 2. The buffer may still be read by the swap-in that released it (on the in stream).
  if (host_read) {
    if (!base_.fences->Done(host_read)) base_.api->stream_wait_event(out_, host_read->event, 0);
    base_.fences->Unref(host_read);
  }
  // 3. A swap-in of this tensor nobody waited for may still be writing it (in stream).
  if (a->ready) {
    if (!base_.fences->Done(a->ready)) base_.api->stream_wait_event(out_, a->ready->event, 0);
    base_.fences->Unref(a->ready);
    a->ready = nullptr;
  }
  // 4. The copy out, piece by piece; each piece's chunks go to the pool with its own fence (the
  // next user waits on that), and out_done (the last) covers the whole copy.
  CUresult r = CUDA_SUCCESS;
  Fence* out_done = CopyOut(a, host, where, &r);
  if (!out_done) {
    destinations_->Release(host, a->span, where, nullptr);
    return r;
  }
  a->out_done = out_done;
  a->host = host;
  a->where = where;
  a->state = Residency::kSwappedOut;
  a->wait_counted = false;
  // 5. The VA keeps its (now stale) mappings until a flush of unmaps after out_done.
  FencePool::Ref(out_done);
  unmaps_->Defer(a->id, a->va, a->span, out_done);
  base_.counters->Add(base_.counters->swap_out_bytes, a->bytes);
  if (where.tier == ipc::Tier::kPeerGpu)
    base_.counters->Add(base_.counters->peer_out_bytes, a->bytes);
  if (where.tier == ipc::Tier::kHostNuma)
    base_.counters->Add(base_.counters->numa_out_bytes, a->bytes);
  return CUDA_SUCCESS;
}

CUresult TransferScheduler::MoveToHost(Allocation* a) {
  if (a->state != Residency::kSwappedOut || a->where.host() || a->host == nullptr) {
    return CUDA_SUCCESS;
  }
  Fence* host_read = nullptr;
  void* host = destinations_->AcquireHost(a->span, &host_read);
  if (!host) {
    base_.counters->Add(base_.counters->host_pool_full);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // The new buffer may still be read by the swap-in that released it; the old one is complete
  // only once the swap-out copy into it is (both on the in/out streams: no host wait).
  for (Fence* f : {host_read, a->out_done}) {
    if (f && !base_.fences->Done(f)) base_.api->stream_wait_event(out_, f->event, 0);
  }
  base_.fences->Unref(host_read);
  CUresult r =
      base_.api->memcpy_dtoh_async(host, reinterpret_cast<CUdeviceptr>(a->host), a->bytes, out_);
  Fence* moved = r == CUDA_SUCCESS ? base_.fences->Record(out_) : nullptr;
  if (!moved) {
    destinations_->Release(host, a->span, Placement{}, nullptr);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN;
  }
  // The peer buffer is free once the move has read it; every later reader of the copy (a
  // swap-in, a host mapping) waits for `moved` through out_done.
  destinations_->Release(a->host, a->span, a->where, moved);
  base_.fences->Unref(a->out_done);
  a->out_done = moved;
  a->host = host;
  a->where = Placement{};
  base_.counters->Add(base_.counters->evacuated_bytes, a->bytes);
  return CUDA_SUCCESS;
}

CUresult TransferScheduler::SwapIn(Allocation* a, const std::vector<Fence*>& waits) {
  CUresult r = CopyIn(a, waits);
  for (Fence* f : waits) base_.fences->Unref(f);
  // The copy has been read (in stream order): its buffer's bytes are dead. Discarded before
  // `ready` is recorded, so that the buffer's next writer, which waits for `ready`, comes after.
  if (r == CUDA_SUCCESS) discard_.Buffer(a->host, a->span, in_);
  a->ready = base_.fences->Record(in_);
  // The next swap-out writing this buffer waits for `ready` (the read above) on its stream.
  ReleaseCopy(a, a->ready);
  base_.fences->Unref(a->out_done);
  a->out_done = nullptr;
  a->state = Residency::kResident;
  a->wait_counted = false;
  base_.counters->Add(base_.counters->swap_in_bytes, a->bytes);
  return r;
}

void TransferScheduler::FinishReclaim(Allocation* a) {
  ReleaseCopy(a, a->out_done);  // the copy out may still write it
  a->ready = a->out_done;       // conservative: writers wait until the copy out has read them
  a->out_done = nullptr;
  a->state = Residency::kResident;
  a->wait_counted = false;
  base_.counters->Add(base_.counters->reclaims);
}

void TransferScheduler::ReleaseCopy(Allocation* a, Fence* busy) {
  destinations_->Release(a->host, a->span, a->where, busy);
  a->host = nullptr;
  a->where = Placement{};
}

void TransferScheduler::SyncStreams() {
  for (CUstream s : {in_, out_}) {
    if (Fence* f = base_.fences->Record(s)) {
      base_.api->event_synchronize(f->event);
      base_.fences->Unref(f);
    }
  }
}

}  // namespace chameleon::shim::swap
