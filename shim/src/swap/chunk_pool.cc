#include "swap/chunk_pool.h"

#include <algorithm>

namespace chameleon::shim::swap {

FencePool::~FencePool() {
  for (Fence* f : all_) {
    if (f->event) api_->event_destroy(f->event);
    delete f;
  }
}

Fence* FencePool::Record(CUstream stream) {
  Fence* f = nullptr;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    CUevent ev = nullptr;
    // Timing off: these events only order work, and timing-enabled events cost more to record.
    if (api_->event_create(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return nullptr;
    f = new Fence;
    f->event = ev;
    all_.push_back(f);
  }
  if (api_->event_record(f->event, stream) != CUDA_SUCCESS) {
    free_.push_back(f);
    return nullptr;
  }
  f->refs = 1;
  f->stream = stream;
  f->seq = ++next_seq_;
  return f;
}

void FencePool::Unref(Fence* f) {
  if (f && --f->refs == 0) free_.push_back(f);
}

bool FencePool::Done(const Fence* f) const {
  return f == nullptr || api_->event_query(f->event) == CUDA_SUCCESS;
}

ChunkPool::ChunkPool(const DriverApi* api, FencePool* fences, SwapCounters* counters, int device,
                     std::size_t chunk_bytes, std::uint64_t limit_bytes,
                     const std::atomic<std::uint64_t>* external_bytes)
    : api_(api),
      fences_(fences),
      counters_(counters),
      device_(device),
      chunk_bytes_(chunk_bytes),
      limit_bytes_(limit_bytes),
      external_bytes_(external_bytes) {}

std::uint64_t ChunkPool::room_bytes() const {
  const std::uint64_t external =
      external_bytes_ ? external_bytes_->load(std::memory_order_relaxed) : 0;
  const std::uint64_t used = created_bytes_ + external;
  return limit_bytes_ > used ? limit_bytes_ - used : 0;
}

ChunkPool::~ChunkPool() {
  // The engine has unmapped everything and drained its streams before destroying the pool.
  for (Chunk& c : chunks_) {
    if (c.handle) api_->mem_release(c.handle);
    fences_->Unref(c.fence);
  }
}

bool ChunkPool::CreateChunk(std::uint32_t* chunk) {
  if (room_bytes() < chunk_bytes_) return false;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  CUmemGenericAllocationHandle h = 0;
  counters_->Vmm(counters_->vmm_creates);
  if (api_->mem_create(&h, chunk_bytes_, &prop, 0) != CUDA_SUCCESS) return false;
  counters_->Add(counters_->chunk_creates);
  created_bytes_ += chunk_bytes_;
  counters_->chunk_bytes.store(created_bytes_, std::memory_order_relaxed);
  std::uint32_t id;
  if (!dead_.empty()) {
    id = dead_.back();
    dead_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(chunks_.size());
    chunks_.emplace_back();
  }
  chunks_[id] = Chunk{h, nullptr, chunks_[id].epoch + 1, 0, false};
  *chunk = id;
  return true;
}

void ChunkPool::AddToPool(std::uint32_t chunk, bool front) {
  chunks_[chunk].pool_seq = ++next_seq_;
  if (front) {
    pool_.push_front({chunk, next_seq_});
  } else {
    pool_.push_back({chunk, next_seq_});
  }
  ++pooled_;
}

void ChunkPool::RemoveFromPool(std::uint32_t chunk) {
  chunks_[chunk].pool_seq = 0;  // its entry goes stale
  --pooled_;
  MaybeCompact();
}

void ChunkPool::MaybeCompact() {
  if (pool_.size() < 64 || pool_.size() < 2 * pooled_) return;
  std::deque<Entry> live;
  for (const Entry& e : pool_) {
    if (Live(e)) live.push_back(e);
  }
  pool_.swap(live);
}

void ChunkPool::WaitFor(CUstream stream, const Fence* fence) {
  std::uint64_t ready = 0, arrive = 0;
  if (api_->event_virtual_ns != nullptr && api_->stream_virtual_ns != nullptr &&
      api_->event_virtual_ns(fence->event, &ready) == CUDA_SUCCESS &&
      api_->stream_virtual_ns(stream, &arrive) == CUDA_SUCCESS && ready > arrive) {
    // The profile's compute time leaves this out (docs/detection.md, "The profile's time").
    counters_->Add(counters_->alloc_wait_ns, ready - arrive);
  }
  api_->stream_wait_event(stream, fence->event, 0);
}

CUresult ChunkPool::Take(std::uint32_t n, CUstream wait_stream, std::vector<std::uint32_t>* out,
                         std::vector<Fence*>* fences) {
  const std::uint64_t can_create = room_bytes() / chunk_bytes_;
  if (pooled_ + can_create < n) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::size_t first = out->size();
  Fence* last_waited = nullptr;
  std::uint64_t reused = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t id;
    while (!pool_.empty() && !Live(pool_.front())) pool_.pop_front();
    if (!pool_.empty()) {
      id = pool_.front().chunk;
      pool_.pop_front();
      RemoveFromPool(id);
      ++reused;
      // Consecutive chunks usually share the fence of the swap-out that freed them: one wait.
      Fence* f = chunks_[id].fence;
      if (!fences && f && f != last_waited) {
        WaitFor(wait_stream, f);
        last_waited = f;
      }
    } else if (!CreateChunk(&id)) {
      // The driver refused below our limit (other memory in use): put back what we took, with
      // the fences they carried (a later taker on another stream must still wait on them).
      // At the front, in their old order: they stay the next to be taken.
      for (std::size_t k = out->size(); k-- > first;) AddToPool((*out)[k], /*front=*/true);
      out->resize(first);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    out->push_back(id);
  }
  counters_->Add(counters_->chunk_reuses, reused);
  // Committed: the taker's stream now waits on every fence; drop them and start a new epoch.
  for (std::size_t k = first; k < out->size(); ++k) {
    Chunk& c = chunks_[(*out)[k]];
    if (fences) {
      fences->push_back(c.fence);  // the reference moves to the caller
    } else {
      fences_->Unref(c.fence);
    }
    c.fence = nullptr;
    ++c.epoch;
  }
  return CUDA_SUCCESS;
}

void ChunkPool::Release(const std::vector<std::uint32_t>& chunks, Fence* fence,
                        std::vector<std::uint64_t>* epochs) {
  if (epochs) epochs->clear();
  for (std::uint32_t id : chunks) {
    const std::uint64_t epoch = ReleaseOne(id, fence);
    if (epochs) epochs->push_back(epoch);
  }
}

std::uint64_t ChunkPool::ReleaseOne(std::uint32_t chunk, Fence* fence) {
  Chunk& c = chunks_[chunk];
  if (fence) FencePool::Ref(fence);
  c.fence = fence;
  c.stale = true;
  AddToPool(chunk, /*front=*/false);
  return c.epoch;
}

bool ChunkPool::Intact(const std::vector<std::uint32_t>& chunks,
                       const std::vector<std::uint64_t>& epochs) const {
  if (chunks.empty() || chunks.size() != epochs.size()) return false;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks_[chunks[i]];
    if (c.pool_seq == 0 || c.epoch != epochs[i]) return false;
  }
  return true;
}

bool ChunkPool::Reclaim(const std::vector<std::uint32_t>& chunks,
                        const std::vector<std::uint64_t>& epochs) {
  if (!Intact(chunks, epochs)) return false;
  for (std::uint32_t id : chunks) {
    RemoveFromPool(id);
    Chunk& c = chunks_[id];
    ++c.epoch;
    fences_->Unref(c.fence);
    c.fence = nullptr;
  }
  return true;
}

std::uint64_t ChunkPool::Trim() {
  std::uint64_t released = 0;
  std::vector<std::uint32_t> idle;
  for (const Entry& e : pool_) {
    if (Live(e) && fences_->Done(chunks_[e.chunk].fence)) idle.push_back(e.chunk);
  }
  for (const std::uint32_t id : idle) {
    ReleaseToDriver(id);
    released += chunk_bytes_;
  }
  counters_->chunk_bytes.store(created_bytes_, std::memory_order_relaxed);
  return released;
}

std::uint64_t ChunkPool::TrimUnmapped(std::uint64_t want) {
  std::vector<std::uint32_t> idle;
  for (const Entry& e : pool_) {
    if (idle.size() * chunk_bytes_ >= want) break;
    const Chunk& c = chunks_[e.chunk];
    if (Live(e) && c.mappings == 0 && fences_->Done(c.fence)) idle.push_back(e.chunk);
  }
  for (const std::uint32_t id : idle) ReleaseToDriver(id);
  counters_->chunk_bytes.store(created_bytes_, std::memory_order_relaxed);
  return idle.size() * chunk_bytes_;
}

void ChunkPool::ReleaseToDriver(std::uint32_t id) {
  Chunk& c = chunks_[id];
  RemoveFromPool(id);
  fences_->Unref(c.fence);
  counters_->Vmm(counters_->vmm_creates);
  api_->mem_release(c.handle);
  c = Chunk{0, nullptr, c.epoch + 1, 0, false, 0};
  dead_.push_back(id);
  created_bytes_ -= chunk_bytes_;
}

}  // namespace chameleon::shim::swap
