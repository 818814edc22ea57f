#include "swap/vmm_buffer_pool.h"

#include <iterator>

#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

VmmBufferPool::~VmmBufferPool() { Trim(0, /*wait=*/true); }

CUdeviceptr VmmBufferPool::Create(std::size_t span) {
  const DriverApi* api = base_.api;
  CUdeviceptr va = 0;
  if (base_.vmm->Reserve(&va, span) != CUDA_SUCCESS) return 0;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = location_;
  CUmemGenericAllocationHandle handle = 0;
  base_.counters->Vmm(base_.counters->vmm_creates);
  CUresult r = api->mem_create(&handle, span, &prop, 0);
  if (r == CUDA_SUCCESS) {
    base_.counters->Vmm(base_.counters->vmm_maps);
    r = api->mem_map(va, span, 0, handle, 0);
    if (r == CUDA_SUCCESS) {
      CUmemAccessDesc access = {};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = accessor_;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      base_.counters->Vmm(base_.counters->vmm_maps);
      r = api->mem_set_access(va, span, &access, 1);
      if (r != CUDA_SUCCESS) base_.vmm->Unmap(va, span);
    }
    if (r != CUDA_SUCCESS) {
      base_.counters->Vmm(base_.counters->vmm_creates);
      api->mem_release(handle);
    }
  }
  if (r != CUDA_SUCCESS) {
    // Out of memory there, or no access from our device: stop asking until told otherwise.
    base_.vmm->FreeAddress(va, span);
    blocked_ = true;
    return 0;
  }
  used_[va] = handle;
  held_bytes_ += span;
  ++creates_;
  return va;
}

void VmmBufferPool::FreeOne(std::multimap<std::size_t, Buffer>::iterator it) {
  const std::size_t span = it->first;
  const Buffer b = it->second;
  idle_.erase(it);
  // A copy may still read or write it: unmapping under it would lose or corrupt data.
  if (b.fence) {
    if (!base_.fences->Done(b.fence)) base_.api->event_synchronize(b.fence->event);
    base_.fences->Unref(b.fence);
  }
  base_.vmm->Unmap(b.va, span);
  base_.counters->Vmm(base_.counters->vmm_creates);
  base_.api->mem_release(b.handle);
  base_.vmm->FreeAddress(b.va, span);
  held_bytes_ -= span;
}

CUdeviceptr VmmBufferPool::Acquire(std::size_t span, std::uint64_t limit, Fence** fence) {
  *fence = nullptr;
  if (held_bytes_ > limit) return 0;  // a shrunk lease: no more use of what is beyond it
  if (auto it = idle_.find(span); it != idle_.end()) {
    const Buffer b = it->second;
    idle_.erase(it);
    used_[b.va] = b.handle;
    *fence = b.fence;
    return b.va;
  }
  if (blocked_ || span > limit) return 0;
  // Room under the limit by dropping idle buffers of other spans, largest first.
  while (held_bytes_ + span > limit && !idle_.empty()) FreeOne(std::prev(idle_.end()));
  if (held_bytes_ + span > limit) return 0;
  return Create(span);
}

void VmmBufferPool::Release(CUdeviceptr va, std::size_t span, Fence* busy) {
  auto it = used_.find(va);
  if (it == used_.end()) return;
  if (busy) FencePool::Ref(busy);
  idle_.emplace(span, Buffer{va, it->second, busy});
  used_.erase(it);
}

std::uint64_t VmmBufferPool::Trim(std::uint64_t limit, bool wait) {
  std::uint64_t freed = 0;
  for (auto it = idle_.end(); held_bytes_ > limit && it != idle_.begin();) {
    --it;
    if (!wait && it->second.fence && !base_.fences->Done(it->second.fence)) continue;
    freed += it->first;
    auto victim = it++;
    FreeOne(victim);
  }
  return freed;
}

}  // namespace chameleon::shim::swap
