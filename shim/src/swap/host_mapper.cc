#include "swap/host_mapper.h"

#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

CUresult HostMapper::Map(Allocation* a, CUstream stream) {
  const DriverApi* api = base_.api;
  const CUstream in = transfers_->in_stream();
  // The host mapping holds the contents in host memory: a copy on a peer GPU comes back first.
  if (const CUresult moved = transfers_->MoveToHost(a); moved != CUDA_SUCCESS) return moved;
  // The stale mapping (chunks possibly serving someone else now) goes first; waits for the
  // swap-out copy only if it is still running.
  if (a->mapped) unmaps_->UnmapNow(a);
  // From now on the host mapping holds the contents (ops may write it): the old chunks must
  // never be reclaimed as if they still did.
  a->chunks.clear();
  a->epochs.clear();
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  base_.counters->Add(base_.counters->vmm_calls, 3);
  CUresult r = api->mem_create(&h, a->span, &prop, 0);
  if (r != CUDA_SUCCESS) return r;  // no host VMM on this driver: the caller fails the op
  r = api->mem_map(a->va, a->span, 0, h, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = base_.vmm->device();
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = api->mem_set_access(a->va, a->span, &access, 1);
    if (r != CUDA_SUCCESS) base_.vmm->Unmap(a->va, a->span);
  }
  if (r != CUDA_SUCCESS) {
    api->mem_release(h);
    return r;
  }
  // The contents: after the swap-out copy that filled the host buffer.
  if (a->out_done && !base_.fences->Done(a->out_done)) {
    api->stream_wait_event(in, a->out_done->event, 0);
  }
  r = api->memcpy_htod_async(a->va, a->host, a->bytes, in);
  Fence* f = base_.fences->Record(in);
  if (r != CUDA_SUCCESS || !f) {
    base_.fences->Unref(f);
    base_.vmm->Unmap(a->va, a->span);
    api->mem_release(h);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN;
  }
  api->stream_wait_event(stream, f->event, 0);
  base_.fences->Unref(a->ready);
  a->ready = f;  // later consumers wait on it too (PrepareSpan)
  a->host_map = h;
  base_.counters->Add(base_.counters->swap_in_bytes, a->bytes);
  return CUDA_SUCCESS;
}

CUresult HostMapper::Unmap(Allocation* a) {
  // Ops may have written through the host mapping: copy the contents back to the host buffer
  // after everything that may still use it (its last stream, the copy that filled it), wait,
  // then unmap (a rare, counted stall: this page is now needed on the device).
  const DriverApi* api = base_.api;
  const CUstream out = transfers_->out_stream();
  const std::uint64_t t0 = NowNs();
  if (Fence* last = a->last_stream ? base_.fences->Record(a->last_stream) : nullptr) {
    api->stream_wait_event(out, last->event, 0);
    base_.fences->Unref(last);
  }
  if (a->ready) {
    api->stream_wait_event(out, a->ready->event, 0);
    base_.fences->Unref(a->ready);
    a->ready = nullptr;
  }
  CUresult r = api->memcpy_dtoh_async(a->host, a->va, a->bytes, out);
  Fence* f = base_.fences->Record(out);
  if (f) {
    const CUresult w = api->event_synchronize(f->event);
    if (r == CUDA_SUCCESS) r = w;
    base_.fences->Unref(f);
  }
  if (r != CUDA_SUCCESS) return r;
  base_.vmm->Unmap(a->va, a->span);
  base_.counters->Add(base_.counters->vmm_calls);
  api->mem_release(a->host_map);
  a->host_map = 0;
  a->mapped = false;
  base_.counters->Add(base_.counters->swap_out_bytes, a->bytes);
  CountStall(base_.counters, t0);
  return CUDA_SUCCESS;
}

}  // namespace chameleon::shim::swap
