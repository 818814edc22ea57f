// The driver entry points the swap executor calls, as a plain table of function pointers.
//
// The executor never links libcuda: the shim fills this table from the real driver it already
// holds (RealDriver's dlopen handle + RealDlsym, so it always gets the driver's own functions and
// never the shim's wrappers), and tests fill it from simgpu's libcuda.so.1 the same way.
// Immutable after ResolveDriverApi; safe to read from any thread.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace chameleon::shim::swap {

/// Driver functions used by the executor. Names in comments are the ABI symbols resolved.
struct DriverApi {
  CUresult (*mem_address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                  unsigned long long) = nullptr;  // cuMemAddressReserve
  CUresult (*mem_address_free)(CUdeviceptr, size_t) = nullptr;    // cuMemAddressFree
  CUresult (*mem_create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                         unsigned long long) = nullptr;             // cuMemCreate
  CUresult (*mem_release)(CUmemGenericAllocationHandle) = nullptr;  // cuMemRelease
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                      unsigned long long) = nullptr;     // cuMemMap
  CUresult (*mem_unmap)(CUdeviceptr, size_t) = nullptr;  // cuMemUnmap
  CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*,
                             size_t) = nullptr;  // cuMemSetAccess
  CUresult (*mem_get_allocation_granularity)(size_t*, const CUmemAllocationProp*,
                                             CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*mem_host_alloc)(void**, size_t, unsigned int) = nullptr;  // cuMemHostAlloc
  CUresult (*mem_free_host)(void*) = nullptr;                          // cuMemFreeHost
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t,
                                CUstream) = nullptr;  // cuMemcpyDtoHAsync_v2
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t,
                                CUstream) = nullptr;                         // cuMemcpyHtoDAsync_v2
  CUresult (*stream_create)(CUstream*, unsigned int) = nullptr;              // cuStreamCreate
  CUresult (*stream_destroy)(CUstream) = nullptr;                            // cuStreamDestroy_v2
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned int) = nullptr;  // cuStreamWaitEvent
  CUresult (*event_create)(CUevent*, unsigned int) = nullptr;                // cuEventCreate
  CUresult (*event_destroy)(CUevent) = nullptr;                              // cuEventDestroy_v2
  CUresult (*event_record)(CUevent, CUstream) = nullptr;                     // cuEventRecord
  CUresult (*event_query)(CUevent) = nullptr;                                // cuEventQuery
  CUresult (*event_synchronize)(CUevent) = nullptr;                          // cuEventSynchronize
  // Optional: device-to-device copies for swapped bytes placed on a peer GPU or a host NUMA
  // node's VMM buffer (Destinations). Without it every placement is local host memory.
  CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t,
                                CUstream) = nullptr;  // cuMemcpyDtoDAsync_v2
  // Optional (simgpu only, null on a real driver): the virtual clocks of chameleon/simgpu/
  // control.h, so that a consumer's wait on a swap-in is judged in virtual time, in stream
  // order, and never by how far simgpu's worker threads happen to have run.
  int (*event_virtual_ns)(void*, std::uint64_t*) = nullptr;   // simgpuEventVirtualNs
  int (*stream_virtual_ns)(void*, std::uint64_t*) = nullptr;  // simgpuStreamVirtualNs
  // Optional (simgpu only): drops a range's contents in stream order, so that a chunk or buffer
  // whose bytes are dead stops costing host RAM and copy time (Discarder). A real GPU has no
  // such cost: without the symbol nothing is discarded.
  int (*mem_discard_async)(std::uint64_t, std::size_t, void*) = nullptr;  // simgpuMemDiscardAsync
};

/// Looks up every entry of DriverApi in `handle` with `sym` (the shim passes RealDlsym(); tests
/// pass dlsym). Returns the ABI name of the first missing symbol, or null when all resolved.
using SymbolLookupFn = void* (*)(void*, const char*);
const char* ResolveDriverApi(void* handle, SymbolLookupFn sym, DriverApi* out);

}  // namespace chameleon::shim::swap
