// A "null" CUDA driver for benchmarking the shim: every entry point returns CUDA_SUCCESS at once,
// so a benchmark through it measures only the shim's own cost (simgpu's worker threads would add
// noise). Allocations hand out increasing fake addresses; every kernel has four parameters:
// two device pointers, an int and a float. Function 0x2000 is named apart ("null_marker") so
// that a benchmark can give iterations a boundary.
//
// Built twice: chameleon_null_cuda (no VMM: the shim's swap executor stays off) and, with
// CHAMELEON_NULL_VMM, chameleon_null_cuda_vmm, which adds the VMM, stream, event and pinned-host
// entry points the executor needs (all immediate; copies copy nothing) so that the benchmark
// measures the launch path with the executor on.
#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

#define NULL_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
std::atomic<std::uint64_t> g_next_address{0x7f0000000000ull};

CUresult FakeAlloc(CUdeviceptr* dptr, size_t bytes) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *dptr = g_next_address.fetch_add((bytes + 255) & ~size_t{255}, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}
}  // namespace

NULL_EXPORT CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  *dev = ordinal;
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuCtxGetDevice(CUdevice* dev) {
  *dev = 0;
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  return FakeAlloc(dptr, bytes);
}
NULL_EXPORT CUresult cuMemFree_v2(CUdeviceptr) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream) {
  return FakeAlloc(dptr, bytes);
}
NULL_EXPORT CUresult cuMemFreeAsync(CUdeviceptr, CUstream) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**) {
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) {
  *name = reinterpret_cast<std::uintptr_t>(f) == 0x2000 ? "null_marker" : "null_kernel_4args";
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuFuncGetParamInfo(CUfunction, size_t index, size_t* offset, size_t* size) {
  static const size_t kOffsets[] = {0, 8, 16, 20};
  static const size_t kSizes[] = {8, 8, 4, 4};
  if (index >= 4) return CUDA_ERROR_INVALID_VALUE;
  *offset = kOffsets[index];
  *size = kSizes[index];
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

#if defined(CHAMELEON_NULL_VMM)
namespace {
std::atomic<std::uint64_t> g_next_va{0x600000000000ull};
std::atomic<std::uint64_t> g_next_handle{1};
}  // namespace

NULL_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp*,
                                                   CUmemAllocationGranularity_flags) {
  *granularity = size_t{2} << 20;
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                                         unsigned long long) {
  *ptr = g_next_va.fetch_add((size + (size_t{2} << 20)) & ~((size_t{2} << 20) - 1),
                             std::memory_order_relaxed);
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemAddressFree(CUdeviceptr, size_t) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t,
                                 const CUmemAllocationProp*, unsigned long long) {
  *handle = g_next_handle.fetch_add(1, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                              unsigned long long) {
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemUnmap(CUdeviceptr, size_t) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) {
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned int) {
  *p = std::malloc(bytes != 0 ? bytes : 1);  // never touched: copies copy nothing
  return *p != nullptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
NULL_EXPORT CUresult cuMemFreeHost(void* p) {
  std::free(p);
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemcpyDtoHAsync_v2(void*, CUdeviceptr, size_t, CUstream) {
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void*, size_t, CUstream) {
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuStreamCreate(CUstream* s, unsigned int) {
  *s = reinterpret_cast<CUstream>(g_next_handle.fetch_add(1, std::memory_order_relaxed));
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuStreamDestroy_v2(CUstream) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuEventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(g_next_handle.fetch_add(1, std::memory_order_relaxed));
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuEventDestroy_v2(CUevent) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuEventQuery(CUevent) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent, CUevent) {
  *ms = 0.0f;
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
#endif  // CHAMELEON_NULL_VMM
