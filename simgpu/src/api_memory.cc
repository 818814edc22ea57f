// Device and host allocations, pools and pointer queries.
#include <sys/mman.h>

#include <mutex>
#include <vector>

#include "api.h"
#include "memory.h"
#include "vmm.h"

using namespace chameleon::simgpu;

namespace {

constexpr std::size_t kAllocAlign = 512;  // what cuMemAlloc guarantees; also the charge quantum

// Sparse memory (docs/simgpu.md): an allocation costs host RAM only for the pages written. With
// transparent huge pages set to "always" one written word would commit 2 MiB, so they are off for
// simulated memory (the madvise default leaves them off anyway; failure only costs RAM).
void* MapSparse(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) madvise(p, bytes, MADV_NOHUGEPAGE);
  return p;
}

std::size_t RoundUp(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

void RaiseMax(std::atomic<std::uint64_t>& peak, std::uint64_t v) {
  std::uint64_t cur = peak.load(std::memory_order_relaxed);
  while (cur < v && !peak.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

CUresult CurrentDevice(Device** out) {
  Context* ctx = nullptr;
  SIMGPU_TRY(CurrentContext(&ctx));
  *out = ctx->device;
  return CUDA_SUCCESS;
}

// Stream-ordered allocation (docs/simgpu.md): bytes of frees still pending on the same stream
// are taken over first. An allocation that does not fit then waits for the frees pending on other
// streams (as the driver's pools may), and as a last resort for everything, before failing.
CUresult AllocAsync(CUdeviceptr* dptr, std::size_t bytes, MemPool* pool, CUstream h, bool pt) {
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  if (!pool) pool = DefaultPool(s->ctx()->device->ordinal);
  Device* dev = TheDriver()->devices[static_cast<std::size_t>(pool->device)].get();
  CUresult r = AllocDevice(dev, bytes, pool, dptr, s);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    // Retry even when there was nothing left to wait for: a free that completed between the
    // failed attempt and the wait has already given its bytes back.
    WaitForPendingFrees(pool->device, s);
    r = AllocDevice(dev, bytes, pool, dptr, s);
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY && dev->pending_plain_free.load() > 0) {
    SynchronizeAll();  // cuMemFreeAsync of plain cuMemAlloc memory, which no pool tracks
    r = AllocDevice(dev, bytes, pool, dptr, s);
  }
  return r;
}

CUresult FreeAsync(CUdeviceptr ptr, CUstream h, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  Range r;
  // Unregistering now makes later launches that still name the pointer fault (use after free);
  // the mapping itself stays until the stream reaches the free, so work queued before it is fine.
  if (!TheDriver()->registry.Remove(ptr, &r)) return CUDA_ERROR_INVALID_VALUE;
  if (r.kind != RangeKind::kDevice) {
    TheDriver()->registry.Add(r);
    return CUDA_ERROR_INVALID_VALUE;
  }
  Device* dev = TheDriver()->devices[static_cast<std::size_t>(r.device)].get();
  auto* pool = static_cast<MemPool*>(r.pool);
  OpSpec op;
  if (pool) {
    // Reusable by later allocations on s from now on; the free uncharges what is left over.
    const std::uint64_t id = pool->AddPending(dev, s, r.charged, r.epoch);
    op.work = [r, dev, pool, id] {
      munmap(reinterpret_cast<void*>(r.base), r.size);
      pool->CompletePending(dev, id);
    };
    SIMGPU_TRY(s->Submit(std::move(op)));
    std::uint64_t vtime = 0;
    const std::uint64_t seq = s->Tail(&vtime);
    pool->Publish(id, seq, vtime);
    return CUDA_SUCCESS;
  }
  dev->pending_free.fetch_add(r.charged);  // plain cuMemAlloc memory: no pool to reuse it
  dev->pending_plain_free.fetch_add(r.charged);
  op.work = [r, dev] {
    munmap(reinterpret_cast<void*>(r.base), r.size);
    dev->Uncharge(r.charged, r.epoch);
    dev->pending_plain_free.fetch_sub(r.charged);
    dev->pending_free.fetch_sub(r.charged);
  };
  return s->Submit(std::move(op));
}

CUresult HostAlloc(void** pp, std::size_t bytes) {
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = MapSparse(bytes);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Range r;
  r.base = reinterpret_cast<std::uintptr_t>(p);
  r.size = bytes;
  r.kind = RangeKind::kPinnedHost;
  r.charged = bytes;
  // The pages land on the NUMA node of the allocating thread, which a CUDA program keeps near
  // its current device: that device's node (without a context, local to whoever copies).
  if (Context* ctx = CurrentContextSlot())
    r.numa = TheDriver()->config.numa_node[static_cast<std::size_t>(ctx->device->ordinal)];
  TheDriver()->registry.Add(r);
  AddPinned(bytes);
  *pp = p;
  return CUDA_SUCCESS;
}

}  // namespace

namespace chameleon::simgpu {

CUresult AllocDevice(Device* dev, std::size_t bytes, MemPool* pool, CUdeviceptr* out,
                     Stream* stream) {
  const std::size_t charge = RoundUp(bytes, kAllocAlign);
  const bool ok =
      pool && stream ? pool->ChargeStreamOrdered(dev, stream, charge) : dev->Charge(charge);
  if (!ok) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = MapSparse(charge);
  if (p == MAP_FAILED) {
    dev->Uncharge(charge, ChargeEpoch());
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Range r;
  r.base = reinterpret_cast<std::uintptr_t>(p);
  r.size = charge;
  r.kind = RangeKind::kDevice;
  r.device = dev->ordinal;
  r.charged = charge;
  r.epoch = ChargeEpoch();
  r.async = pool != nullptr;
  r.pool = pool;
  if (pool) RaiseMax(pool->used_high, pool->used.fetch_add(charge) + charge);
  TheDriver()->registry.Add(r);
  *out = r.base;
  return CUDA_SUCCESS;
}

CUresult FreeDevice(CUdeviceptr ptr) {
  Range r;
  if (!TheDriver()->registry.Remove(ptr, &r)) return CUDA_ERROR_INVALID_VALUE;
  if (r.kind != RangeKind::kDevice) {
    TheDriver()->registry.Add(r);
    return CUDA_ERROR_INVALID_VALUE;
  }
  munmap(reinterpret_cast<void*>(r.base), r.size);
  TheDriver()->devices[static_cast<std::size_t>(r.device)]->Uncharge(r.charged, r.epoch);
  if (auto* pool = static_cast<MemPool*>(r.pool)) pool->used.fetch_sub(r.charged);
  return CUDA_SUCCESS;
}

}  // namespace chameleon::simgpu

SIMGPU_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(CurrentDevice(&dev));
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return AllocDevice(dev, bytes, nullptr, dptr);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                       size_t height, unsigned int element_size) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(CurrentDevice(&dev));
  if (!dptr || !pitch || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element_size != 4 && element_size != 8 && element_size != 16) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t p = RoundUp(width, kAllocAlign);
  SIMGPU_TRY(AllocDevice(dev, p * height, nullptr, dptr));
  *pitch = p;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemFree_v2(CUdeviceptr ptr) try {
  SIMGPU_ENTRY();
  Context* ctx = nullptr;
  SIMGPU_TRY(CurrentContext(&ctx));
  if (ptr == 0) return CUDA_SUCCESS;
  SynchronizeAll();  // cuMemFree synchronises with the device, as the real driver does
  return FreeDevice(ptr);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(CurrentDevice(&dev));
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  *total = dev->capacity;
  // A node's other processes hold part of the device too (SIMGPU_NODE); what a killed one held
  // is free again.
  if (dev->ledger) dev->ledger->ReclaimStale();
  *free_bytes = dev->capacity - std::min<std::uint64_t>(dev->InUse(), dev->capacity);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  auto r = TheDriver()->registry.Find(ptr);
  if (!r || r->kind == RangeKind::kPinnedHost) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = r->base;
  if (size) *size = r->size;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream s) try {
  SIMGPU_ENTRY();
  return AllocAsync(dptr, bytes, nullptr, s, false);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream s) try {
  SIMGPU_ENTRY();
  return AllocAsync(dptr, bytes, nullptr, s, true);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                            CUstream s) try {
  SIMGPU_ENTRY();
  MemPool* p = AsPool(pool);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return AllocAsync(dptr, bytes, p, s, false);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                 CUstream s) try {
  SIMGPU_ENTRY();
  MemPool* p = AsPool(pool);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return AllocAsync(dptr, bytes, p, s, true);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream s) try {
  SIMGPU_ENTRY();
  return FreeAsync(ptr, s, false);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr ptr, CUstream s) try {
  SIMGPU_ENTRY();
  return FreeAsync(ptr, s, true);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int) try {
  SIMGPU_ENTRY();
  return HostAlloc(pp, bytes);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemAllocHost_v2(void** pp, size_t bytes) try {
  SIMGPU_ENTRY();
  return HostAlloc(pp, bytes);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemFreeHost(void* p) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  auto r = TheDriver()->registry.Find(reinterpret_cast<std::uintptr_t>(p));
  if (!r || r->kind != RangeKind::kPinnedHost || r->external ||
      r->base != reinterpret_cast<std::uintptr_t>(p))
    return CUDA_ERROR_INVALID_VALUE;
  SynchronizeAll();
  TheDriver()->registry.Remove(r->base, nullptr);
  munmap(p, r->size);
  SubPinned(r->charged);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p,
                                                 unsigned int flags) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto r = TheDriver()->registry.Find(reinterpret_cast<std::uintptr_t>(p));
  if (!r || r->kind != RangeKind::kPinnedHost) return CUDA_ERROR_INVALID_VALUE;
  *dptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: same address
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (TheDriver()->registry.Find(reinterpret_cast<std::uintptr_t>(p)))
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  Range r;
  r.base = reinterpret_cast<std::uintptr_t>(p);
  r.size = bytes;
  r.kind = RangeKind::kPinnedHost;
  r.external = true;
  TheDriver()->registry.Add(r);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemHostUnregister(void* p) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  auto r = TheDriver()->registry.Find(reinterpret_cast<std::uintptr_t>(p));
  if (!r || !r->external || r->base != reinterpret_cast<std::uintptr_t>(p))
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  SynchronizeAll();
  TheDriver()->registry.Remove(r->base, nullptr);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr,
                                          CUdeviceptr ptr) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  auto r = TheDriver()->registry.Find(ptr);
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  Place place = TheDriver()->registry.Classify(ptr, &device);
  const bool host = place == Place::kPinnedHost;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = host ? 0 : device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(
          TheDriver()->devices[static_cast<std::size_t>(host ? 0 : device)]->primary);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = r->base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = r->size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = place != Place::kUnmappedDevice;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}
SIMGPU_CATCH
