// SwapEngine: allocation, free, limits and lookups. Transfers: swap_transfer.cc; unmapping:
// swap_unmap.cc; the free-range cache: free_ranges.cc.
#include "swap/swap_engine.h"

#include <algorithm>
#include <chrono>

namespace chameleon::shim::swap {

SwapEngine::SwapEngine(const DriverApi& api, const SwapEngineOptions& options,
                       SwapCounters* counters)
    : api_(api), options_(options), counters_(counters) {}

SwapEngine::~SwapEngine() {
  if (!side_) return;
  FlushUnmaps(/*all=*/true);
  std::lock_guard lock(mu_);
  SyncSideStreams();
  DropFreeRangesLocked();
  for (auto& [id, a] : allocs_) {
    if (a->mapped) Unmap(a->va, a->span);
    if (!a->adopted) {
      counters_->Vmm(counters_->vmm_reserves);
      api_.mem_address_free(a->va, a->span);
    }
    if (a->host) host_->Release(a->host, a->span);
    fences_->Unref(a->ready);
    fences_->Unref(a->out_done);
  }
  allocs_.clear();
  host_.reset();
  chunks_.reset();
  fences_.reset();
  api_.stream_destroy(side_);
  if (out_) api_.stream_destroy(out_);
}

void SwapEngine::SyncSideStreams() {
  for (CUstream s : {side_, out_}) {
    if (Fence* f = fences_->Record(s)) {
      api_.event_synchronize(f->event);
      fences_->Unref(f);
    }
  }
}

CUresult SwapEngine::Init() {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = options_.device;
  std::size_t granularity = 0;
  CUresult r =
      api_.mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return r;
  if (granularity == 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t want = options_.chunk_bytes ? options_.chunk_bytes : granularity;
  chunk_bytes_ = (want + granularity - 1) / granularity * granularity;
  // Non-blocking: the side stream must not serialise with the legacy default stream, or every
  // swap copy would wait for (and block) the program's default-stream work.
  // Two of them, one per direction: swap-outs and swap-ins use the two directions of the host
  // link concurrently, ordered by events where they depend on each other.
  r = api_.stream_create(&side_, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) return r;
  r = api_.stream_create(&out_, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    api_.stream_destroy(side_);
    side_ = nullptr;
    return r;
  }
  fences_ = std::make_unique<FencePool>(&api_);
  chunks_ =
      std::make_unique<ChunkPool>(&api_, fences_.get(), counters_, options_.device, chunk_bytes_,
                                  options_.device_limit_bytes, options_.external_bytes);
  host_ = std::make_unique<HostPool>(&api_, counters_, options_.host_pool_cap_bytes, fences_.get());
  return CUDA_SUCCESS;
}

std::uint64_t SwapEngine::NowNs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void SwapEngine::Stall(std::uint64_t t0_ns) {
  counters_->Add(counters_->stall_count);
  counters_->Add(counters_->stall_ns, NowNs() - t0_ns);
}

SwapEngine::Allocation* SwapEngine::Get(AllocId id) {
  auto it = allocs_.find(id);
  return it == allocs_.end() ? nullptr : it->second.get();
}
const SwapEngine::Allocation* SwapEngine::Get(AllocId id) const {
  auto it = allocs_.find(id);
  return it == allocs_.end() ? nullptr : it->second.get();
}

CUresult SwapEngine::MapChunks(CUdeviceptr va, const std::vector<std::uint32_t>& chunks) {
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    counters_->Vmm(counters_->vmm_maps);
    const CUresult r =
        api_.mem_map(va + i * chunk_bytes_, chunk_bytes_, 0, chunks_->handle(chunks[i]), 0);
    if (r != CUDA_SUCCESS) {
      if (i > 0) Unmap(va, i * chunk_bytes_);
      return r;
    }
  }
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = options_.device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  counters_->Vmm(counters_->vmm_maps);
  const CUresult r = api_.mem_set_access(va, chunks.size() * chunk_bytes_, &access, 1);
  if (r != CUDA_SUCCESS) Unmap(va, chunks.size() * chunk_bytes_);
  return r;
}

bool SwapEngine::EvictClosest(std::size_t bytes, AllocId exclude) {
  // The paper's rule: the resident tensor whose size is closest to the request.
  Allocation* best = nullptr;
  std::size_t best_diff = 0;
  for (auto& [id, a] : allocs_) {
    if (id == exclude || a->pinned || a->held || a->state != Residency::kResident) continue;
    const std::size_t diff = a->bytes > bytes ? a->bytes - bytes : bytes - a->bytes;
    if (!best || diff < best_diff || (diff == best_diff && id < best->id)) {
      best = a.get();
      best_diff = diff;
    }
  }
  if (!best || SwapOutLocked(best, best->last_stream) != CUDA_SUCCESS) return false;
  MirrorFlags(best);
  counters_->Add(counters_->evictions);
  return true;
}

CUresult SwapEngine::TakeChunks(std::uint32_t n, CUstream wait_stream, AllocId exclude,
                                std::vector<std::uint32_t>* out, std::vector<Fence*>* fences) {
  for (;;) {
    const CUresult r = chunks_->Take(n, wait_stream, out, fences);
    if (r == CUDA_SUCCESS) return r;
    // Freed chunks pool up without an eviction; only then do we evict (no host wait either way:
    // the taker's stream waits on the victim's swap-out fence).
    if (!EvictClosest(static_cast<std::size_t>(n) * chunk_bytes_, exclude)) return r;
  }
}

void SwapEngine::MirrorFlags(const Allocation* a) {
  if (!a->flags) return;
  std::uint32_t set = 0;
  if (a->state == Residency::kSwappedOut) set |= kSwappedOut;
  if (a->state == Residency::kResident && a->ready) set |= kSwapInFlight;
  const std::uint32_t mask = kSwappedOut | kSwapInFlight;
  a->flags->fetch_and(~(mask & ~set), std::memory_order_release);
  a->flags->fetch_or(set, std::memory_order_release);
}

void SwapEngine::AttachFlags(AllocId id, std::atomic<std::uint32_t>* flags) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a) return;
  a->flags = flags;
  MirrorFlags(a);
}

CUresult SwapEngine::Allocate(std::size_t bytes, CUstream stream, CUdeviceptr* ptr, AllocId* id,
                              std::atomic<std::uint32_t>* flags) {
  if (!side_) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == 0 || !ptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu_);
  const std::size_t span = (bytes + chunk_bytes_ - 1) / chunk_bytes_ * chunk_bytes_;
  std::vector<std::uint32_t> chunks;
  CUdeviceptr va = ReuseFreeRangeLocked(span, stream, &chunks);
  if (va != 0 && !chunks.empty()) {  // still mapped to its intact chunks: nothing to do
    TrackLocked(va, bytes, span, std::move(chunks), stream, id, flags);
    *ptr = va;
    return CUDA_SUCCESS;
  }
  CUresult r = CUDA_SUCCESS;
  if (va == 0) {
    counters_->Vmm(counters_->vmm_reserves);
    r = api_.mem_address_reserve(&va, span, chunk_bytes_, 0, 0);
    if (r != CUDA_SUCCESS) return r;
  }
  r = MapNewLocked(va, bytes, span, stream, id, flags);
  if (r != CUDA_SUCCESS) {
    counters_->Vmm(counters_->vmm_reserves);
    api_.mem_address_free(va, span);
    return r;
  }
  *ptr = va;
  return CUDA_SUCCESS;
}

CUresult SwapEngine::MapNewLocked(CUdeviceptr va, std::size_t bytes, std::size_t span,
                                  CUstream stream, AllocId* id, std::atomic<std::uint32_t>* flags) {
  std::vector<std::uint32_t> chunks;
  CUresult r = TakeChunks(static_cast<std::uint32_t>(span / chunk_bytes_), stream, 0, &chunks);
  if (r == CUDA_SUCCESS) {
    r = MapChunks(va, chunks);
    if (r != CUDA_SUCCESS) chunks_->Release(chunks, nullptr, nullptr);
  }
  if (r != CUDA_SUCCESS) return r;
  TrackLocked(va, bytes, span, std::move(chunks), stream, id, flags);
  return CUDA_SUCCESS;
}

void SwapEngine::TrackLocked(CUdeviceptr va, std::size_t bytes, std::size_t span,
                             std::vector<std::uint32_t> chunks, CUstream stream, AllocId* id,
                             std::atomic<std::uint32_t>* flags) {
  auto a = std::make_unique<Allocation>();
  a->id = next_id_++;
  a->va = va;
  a->bytes = bytes;
  a->span = span;
  a->chunks = std::move(chunks);
  a->last_stream = stream;
  a->flags = flags;
  MirrorFlags(a.get());
  if (id) *id = a->id;
  by_address_[va] = a->id;
  allocs_.emplace(a->id, std::move(a));
}

CUresult SwapEngine::Free(AllocId id, CUstream stream) {
  std::lock_guard lock(mu_);
  Allocation* a = Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  if (a->state == Residency::kResident) {
    // Stream-ordered: the next user of these chunks waits until `stream` passed the free.
    Fence* f = fences_->Record(stream);
    if (f && a->ready && !fences_->Done(a->ready)) {
      // A swap-in nobody waited for may still be writing the chunks (or, after a reclaim, the
      // swap-out copy still reading them, on the out stream): order the fence after both.
      api_.stream_wait_event(side_, f->event, 0);
      api_.stream_wait_event(side_, a->ready->event, 0);
      fences_->Unref(f);
      f = fences_->Record(side_);
    }
    if (a->adopted) {
      chunks_->Release(a->chunks, f, nullptr);
      pending_.push_back({0, a->va, a->span, f});  // takes Record's reference
    } else {
      CacheFreeRangeLocked(a, f);  // releases the chunks; takes Record's reference
    }
  } else {
    // The host copy is dropped. Its buffer may still be the target of the in-flight swap-out
    // copy: the next writer is a swap-out (same out stream, ordered after it), and freeing the
    // buffer to the driver waits for the fence.
    host_->Release(a->host, a->span, a->out_done);
    a->host = nullptr;
    bool converted = false;
    for (PendingUnmap& p : pending_) {
      if (p.id == id) {
        p.id = 0;  // unmap (when the copy is done) then release the VA
        converted = true;
      }
    }
    if (!converted) {
      counters_->Vmm(counters_->vmm_reserves);
      api_.mem_address_free(a->va, a->span);
    }
  }
  fences_->Unref(a->ready);
  fences_->Unref(a->out_done);
  by_address_.erase(a->va);
  allocs_.erase(id);
  return CUDA_SUCCESS;
}

void SwapEngine::SetPinned(AllocId id, bool pinned) {
  std::lock_guard lock(mu_);
  if (Allocation* a = Get(id)) a->pinned = pinned;
}

void SwapEngine::NoteUse(AllocId id, CUstream stream) {
  std::lock_guard lock(mu_);
  if (Allocation* a = Get(id)) a->last_stream = stream;
}

AllocId SwapEngine::Find(CUdeviceptr address) const {
  std::lock_guard lock(mu_);
  auto it = by_address_.upper_bound(address);
  if (it == by_address_.begin()) return 0;
  --it;
  const Allocation* a = Get(it->second);
  return a && address < a->va + a->span ? a->id : 0;
}

Residency SwapEngine::State(AllocId id) const {
  std::lock_guard lock(mu_);
  const Allocation* a = Get(id);
  return a ? a->state : Residency::kUnknown;
}

bool SwapEngine::UnmapPending(AllocId id) const {
  std::lock_guard lock(mu_);
  const Allocation* a = Get(id);
  return a && a->state == Residency::kSwappedOut && a->mapped;
}

bool SwapEngine::MakeRoom(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (!chunks_) return false;
  const auto fits = [&] { return chunks_->room_bytes() >= bytes; };
  if (fits()) return true;
  TrimLocked();
  if (fits()) return true;
  DrainAndTrimLocked();
  // Each eviction puts the victim's chunks in the pool; draining lets them go to the driver.
  while (!fits() && EvictClosest(bytes, 0)) DrainAndTrimLocked();
  return fits();
}

bool SwapEngine::ReleaseBytes(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (!chunks_) return false;
  std::uint64_t released = TrimLocked();
  if (released < bytes) released += DrainAndTrimLocked();
  while (released < bytes && EvictClosest(bytes, 0)) released += DrainAndTrimLocked();
  return released > 0;
}

void SwapEngine::SetDeviceLimit(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  options_.device_limit_bytes = bytes;
  if (!chunks_) return;
  chunks_->set_limit_bytes(bytes);
  TrimLocked();
}

std::uint64_t SwapEngine::device_limit() const {
  std::lock_guard lock(mu_);
  return options_.device_limit_bytes;
}

std::uint64_t SwapEngine::chunk_bytes_in_use() const {
  std::lock_guard lock(mu_);
  return chunks_ ? chunks_->created_bytes() - chunks_->pooled() * chunk_bytes_ : 0;
}

std::uint64_t SwapEngine::chunk_bytes_created() const {
  std::lock_guard lock(mu_);
  return chunks_ ? chunks_->created_bytes() : 0;
}

}  // namespace chameleon::shim::swap
