// SwapEngine: builds its parts in Init, takes the lock and hands each call to the part that does
// the job (see the header for the list).
#include "swap/swap_engine.h"

#include "swap/release_all.h"

namespace chameleon::shim::swap {

SwapEngine::SwapEngine(const DriverApi& api, const SwapEngineOptions& options,
                       SwapCounters* counters)
    : api_(api),
      options_(options),
      counters_(counters),
      device_limit_(options.device_limit_bytes) {}

SwapEngine::~SwapEngine() {
  if (!side_) return;
  FlushUnmaps(/*all=*/true);
  std::lock_guard lock(mu_);
  transfers_->SyncStreams();
  free_ranges_->Drop();
  ReleaseAllAllocations(table_, *vmm_, *transfers_, *fences_);
  adopted_.reset();
  residency_.reset();
  host_maps_.reset();
  allocator_.reset();
  evictor_.reset();
  leases_.reset();
  transfers_.reset();
  unmaps_.reset();
  free_ranges_.reset();
  destinations_->Trim(/*all=*/true);  // its pools unmap through vmm_
  destinations_.reset();
  vmm_.reset();
  host_.reset();
  chunks_.reset();
  fences_.reset();
  api_.stream_destroy(side_);
  if (out_) api_.stream_destroy(out_);
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
  chunks_ = std::make_unique<ChunkPool>(&api_, fences_.get(), counters_, options_.device,
                                        chunk_bytes_, device_limit_.load(std::memory_order_relaxed),
                                        options_.external_bytes);
  host_ = std::make_unique<HostPool>(&api_, counters_, options_.host_pool_cap_bytes, fences_.get());
  vmm_ = std::make_unique<VaMapper>(&api_, chunks_.get(), counters_, options_.device);
  const SwapBase base{&api_, fences_.get(), chunks_.get(), vmm_.get(), counters_};
  free_ranges_ = std::make_unique<FreeRangeCache>(base);
  unmaps_ = std::make_unique<UnmapBatcher>(base, &table_, free_ranges_.get());
  destinations_ = std::make_unique<Destinations>(
      base, host_.get(), options_.device, options_.placement, api_.memcpy_dtod_async != nullptr);
  transfers_ =
      std::make_unique<TransferScheduler>(base, side_, out_, destinations_.get(), unmaps_.get());
  leases_ = std::make_unique<LeaseSettler>(base, &table_, transfers_.get(), destinations_.get());
  evictor_ =
      std::make_unique<Evictor>(base, &table_, transfers_.get(), unmaps_.get(), free_ranges_.get());
  if (options_.eviction == EvictionRule::kBelady) evictor_->UseBelady(&history_, &position_);
  evictor_->AskBackLent(&lent_bytes_);
  allocator_ = std::make_unique<Allocator>(base, &table_, free_ranges_.get(), unmaps_.get(),
                                           transfers_.get(), evictor_.get());
  host_maps_ = std::make_unique<HostMapper>(base, unmaps_.get(), transfers_.get());
  residency_ =
      std::make_unique<ResidencyManager>(base, options_.skip_swap_in_wait, &table_, unmaps_.get(),
                                         transfers_.get(), evictor_.get(), host_maps_.get());
  adopted_ = std::make_unique<AdoptedRanges>(base, &table_, allocator_.get(), unmaps_.get(),
                                             transfers_.get(), host_maps_.get(), residency_.get());
  return CUDA_SUCCESS;
}

void SwapEngine::CloseUseIteration(std::uint32_t ops, bool recorded) {
  std::lock_guard lock(mu_);
  if (recorded) {
    history_.Close(ops, table_.next_id());
  } else {
    history_.Skip(ops, table_.next_id());
  }
}

bool SwapEngine::UsesKnown() const {
  std::lock_guard lock(mu_);
  return history_.known();
}

void SwapEngine::AttachFlags(AllocId id, std::atomic<std::uint32_t>* flags) {
  std::lock_guard lock(mu_);
  Allocation* a = table_.Get(id);
  if (!a) return;
  a->flags = flags;
  MirrorFlags(*a);
}

CUresult SwapEngine::Allocate(std::size_t bytes, CUstream stream, CUdeviceptr* ptr, AllocId* id,
                              std::atomic<std::uint32_t>* flags) {
  if (!side_) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == 0 || !ptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu_);
  return allocator_->Allocate(bytes, stream, ptr, id, flags);
}

CUresult SwapEngine::Free(AllocId id, CUstream stream) {
  std::lock_guard lock(mu_);
  return allocator_ ? allocator_->Free(id, stream) : CUDA_ERROR_NOT_FOUND;
}

CUresult SwapEngine::SwapOut(AllocId id, CUstream compute, Placement want) {
  std::lock_guard lock(mu_);
  Allocation* a = table_.Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  const CUresult r = transfers_->SwapOut(a, compute, want);
  MirrorFlags(*a);
  return r;
}

void SwapEngine::ApplyLeases(std::span<const ipc::LeaseGrant> leases, std::uint64_t generation) {
  std::lock_guard lock(mu_);
  if (leases_) leases_->Apply(leases, generation);
}

void SwapEngine::SettleLeases() {
  std::lock_guard lock(mu_);
  if (leases_) leases_->Settle();
}

void SwapEngine::SetLentBytes(std::uint64_t bytes) {
  if (lent_bytes_.exchange(bytes, std::memory_order_relaxed) != bytes) {
    counters_->reclaim_request_bytes.store(0, std::memory_order_relaxed);
  }
}

std::uint64_t SwapEngine::peer_held_bytes() const {
  std::lock_guard lock(mu_);
  return destinations_ ? destinations_->peer_held_bytes() : 0;
}

CUresult SwapEngine::SwapIn(AllocId id) {
  std::lock_guard lock(mu_);
  Allocation* a = table_.Get(id);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  const CUresult r = residency_->SwapIn(a);
  MirrorFlags(*a);
  return r;
}

CUresult SwapEngine::WaitResident(AllocId id, CUstream consumer) {
  std::lock_guard lock(mu_);
  Allocation* a = table_.Get(id);
  return a ? residency_->WaitResident(a, consumer) : CUDA_ERROR_NOT_FOUND;
}

CUresult SwapEngine::FaultIn(AllocId id) {
  std::lock_guard lock(mu_);
  Allocation* a = table_.Get(id);
  return a ? residency_->FaultIn(a) : CUDA_ERROR_NOT_FOUND;
}

CUresult SwapEngine::PrepareUse(const AllocId* ids, std::size_t n, CUstream stream) {
  std::lock_guard lock(mu_);
  return residency_ ? residency_->PrepareUse(ids, n, stream) : CUDA_SUCCESS;
}

CUresult SwapEngine::PrepareSpan(const AllocId* named, std::size_t n, const AllocId* reach,
                                 std::size_t m, CUstream stream) {
  std::lock_guard lock(mu_);
  return residency_ ? residency_->PrepareSpan(named, n, reach, m, stream) : CUDA_SUCCESS;
}

bool SwapEngine::MakeRoom(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  return evictor_ && evictor_->MakeRoom(bytes);
}

bool SwapEngine::ReleaseBytes(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  return evictor_ && evictor_->ReleaseBytes(bytes);
}

void SwapEngine::SetDeviceLimit(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  device_limit_.store(bytes, std::memory_order_relaxed);
  if (!chunks_) return;
  chunks_->set_limit_bytes(bytes);
  evictor_->Trim();
}

std::uint64_t SwapEngine::device_limit() const {
  return device_limit_.load(std::memory_order_relaxed);
}

std::uint64_t SwapEngine::chunk_bytes_in_use() const {
  std::lock_guard lock(mu_);
  return chunks_ ? chunks_->created_bytes() - chunks_->pooled() * chunk_bytes_ : 0;
}

std::uint64_t SwapEngine::chunk_bytes_created() const {
  std::lock_guard lock(mu_);
  return chunks_ ? chunks_->created_bytes() : 0;
}

void SwapEngine::FlushUnmaps(bool all) {
  std::lock_guard lock(mu_);
  if (!unmaps_) return;
  // An unmap synchronises the device, so a batch while swap copies are in flight makes the host
  // wait for the whole backlog: at a step's end, the optimizer state's swap-outs (~130 ms on
  // GPT-2 XL at three quarters of its peak, where the next forward would have overlapped them).
  // Such a batch waits for a quiet moment (the next flush point, or the forced unmap a swap-in
  // needs), unless the backlog of ranges grew past the cap.
  if (!all && unmaps_->pending() < kMaxDeferredUnmaps && CopiesInFlight()) return;
  unmaps_->Flush(all);
}

bool SwapEngine::CopiesInFlight() {
  for (CUstream stream : {out_, side_}) {
    if (stream == nullptr) continue;
    Fence* probe = fences_->Record(stream);
    if (probe == nullptr) return false;  // cannot tell: flush as before
    const bool done = fences_->Done(probe);
    fences_->Unref(probe);
    if (!done) return true;
  }
  return false;
}

std::uint64_t SwapEngine::TrimPool() {
  std::lock_guard lock(mu_);
  return evictor_ ? evictor_->Trim() : 0;
}

CUresult SwapEngine::Adopt(CUdeviceptr va, std::size_t bytes, AllocId* id,
                           std::atomic<std::uint32_t>* flags) {
  if (!side_) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == 0 || bytes % chunk_bytes_ != 0 || va % chunk_bytes_ != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(mu_);
  return adopted_->Adopt(va, bytes, id, flags);
}

CUresult SwapEngine::Unadopt(AllocId id, bool keep) {
  std::lock_guard lock(mu_);
  return adopted_ ? adopted_->Unadopt(id, keep) : CUDA_ERROR_INVALID_VALUE;
}

CUresult SwapEngine::Rebind(AllocId id, CUdeviceptr va, std::atomic<std::uint32_t>* flags) {
  std::lock_guard lock(mu_);
  return adopted_ ? adopted_->Rebind(id, va, flags) : CUDA_ERROR_INVALID_VALUE;
}

void SwapEngine::SetPinned(AllocId id, bool pinned) {
  std::lock_guard lock(mu_);
  if (Allocation* a = table_.Get(id)) a->pinned = pinned;
}

void SwapEngine::NoteUse(AllocId id, CUstream stream) {
  std::lock_guard lock(mu_);
  if (Allocation* a = table_.Get(id)) a->last_stream = stream;
}

AllocId SwapEngine::Find(CUdeviceptr address) const {
  std::lock_guard lock(mu_);
  return table_.Find(address);
}

Residency SwapEngine::State(AllocId id) const {
  std::lock_guard lock(mu_);
  const Allocation* a = table_.Get(id);
  return a ? a->state : Residency::kUnknown;
}

bool SwapEngine::UnmapPending(AllocId id) const {
  std::lock_guard lock(mu_);
  const Allocation* a = table_.Get(id);
  return a && a->state == Residency::kSwappedOut && a->mapped;
}

}  // namespace chameleon::shim::swap
