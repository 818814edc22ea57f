// Stream-ordered memory pools (handles and attributes; the reuse logic is in pool.cc). simgpu's
// pools do not cache executed frees: those bytes return to the device at once.
#include <vector>

#include "api.h"
#include "memory.h"

using namespace chameleon::simgpu;

namespace chameleon::simgpu {

MemPool* DefaultPool(int device) {
  static auto* pools = [] {
    auto* v = new std::vector<MemPool>(kMaxDevices);
    for (int i = 0; i < kMaxDevices; ++i) (*v)[static_cast<std::size_t>(i)].device = i;
    return v;
  }();
  return &(*pools)[static_cast<std::size_t>(device)];
}

MemPool* AsPool(CUmemoryPool h) {
  auto* p = reinterpret_cast<MemPool*>(h);
  return p && p->magic.load() == kPoolMagic ? p : nullptr;
}

}  // namespace chameleon::simgpu

SIMGPU_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(DefaultPool(device));
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice device) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(DefaultPool(device));
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) try {
  SIMGPU_ENTRY();
  if (!pool || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(props->location.id, &dev));
  auto* p = new MemPool;  // never freed: stale handles stay readable
  p->device = dev->ordinal;
  RegisterPool(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemPoolDestroy(CUmemoryPool pool) try {
  SIMGPU_ENTRY();
  MemPool* p = AsPool(pool);
  if (!p || p == DefaultPool(p->device)) return CUDA_ERROR_INVALID_VALUE;
  p->magic.store(0);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t) try {
  SIMGPU_ENTRY();
  return AsPool(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                          void* value) try {
  SIMGPU_ENTRY();
  MemPool* p = AsPool(pool);
  if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      p->release_threshold.store(*static_cast<cuuint64_t*>(value));
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      p->used_high.store(p->used.load());
      return CUDA_SUCCESS;
    default:
      return CUDA_SUCCESS;  // reuse policies: accepted, simgpu does not cache
  }
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                          void* value) try {
  SIMGPU_ENTRY();
  MemPool* p = AsPool(pool);
  if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *static_cast<cuuint64_t*>(value) = p->release_threshold.load();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = p->used.load();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = p->used_high.load();
      return CUDA_SUCCESS;
    default:
      *static_cast<int*>(value) = 0;
      return CUDA_SUCCESS;
  }
}
SIMGPU_CATCH
