#include "swap/driver_api.h"

namespace chameleon::shim::swap {
namespace {

template <typename Fn>
bool Resolve(void* handle, SymbolLookupFn sym, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(sym(handle, name));
  return *out != nullptr;
}

}  // namespace

const char* ResolveDriverApi(void* handle, SymbolLookupFn sym, DriverApi* out) {
  DriverApi api;
#define CHAMELEON_SWAP_RESOLVE(field, name) \
  if (!Resolve(handle, sym, name, &api.field)) return name
  CHAMELEON_SWAP_RESOLVE(mem_address_reserve, "cuMemAddressReserve");
  CHAMELEON_SWAP_RESOLVE(mem_address_free, "cuMemAddressFree");
  CHAMELEON_SWAP_RESOLVE(mem_create, "cuMemCreate");
  CHAMELEON_SWAP_RESOLVE(mem_release, "cuMemRelease");
  CHAMELEON_SWAP_RESOLVE(mem_map, "cuMemMap");
  CHAMELEON_SWAP_RESOLVE(mem_unmap, "cuMemUnmap");
  CHAMELEON_SWAP_RESOLVE(mem_set_access, "cuMemSetAccess");
  CHAMELEON_SWAP_RESOLVE(mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  CHAMELEON_SWAP_RESOLVE(mem_host_alloc, "cuMemHostAlloc");
  CHAMELEON_SWAP_RESOLVE(mem_free_host, "cuMemFreeHost");
  CHAMELEON_SWAP_RESOLVE(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
  CHAMELEON_SWAP_RESOLVE(memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
  CHAMELEON_SWAP_RESOLVE(stream_create, "cuStreamCreate");
  CHAMELEON_SWAP_RESOLVE(stream_destroy, "cuStreamDestroy_v2");
  CHAMELEON_SWAP_RESOLVE(stream_wait_event, "cuStreamWaitEvent");
  CHAMELEON_SWAP_RESOLVE(event_create, "cuEventCreate");
  CHAMELEON_SWAP_RESOLVE(event_destroy, "cuEventDestroy_v2");
  CHAMELEON_SWAP_RESOLVE(event_record, "cuEventRecord");
  CHAMELEON_SWAP_RESOLVE(event_query, "cuEventQuery");
  CHAMELEON_SWAP_RESOLVE(event_synchronize, "cuEventSynchronize");
#undef CHAMELEON_SWAP_RESOLVE
  Resolve(handle, sym, "cuMemcpyDtoDAsync_v2", &api.memcpy_dtod_async);  // optional
  Resolve(handle, sym, "simgpuEventVirtualNs", &api.event_virtual_ns);
  Resolve(handle, sym, "simgpuStreamVirtualNs", &api.stream_virtual_ns);
  Resolve(handle, sym, "simgpuMemDiscardAsync", &api.mem_discard_async);
  *out = api;
  return nullptr;
}

}  // namespace chameleon::shim::swap
