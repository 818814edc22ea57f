// A "null" CUDA driver for benchmarking the shim: every entry point returns CUDA_SUCCESS at once,
// so a benchmark through it measures only the shim's own cost (simgpu's worker threads would add
// noise). Allocations hand out increasing fake addresses; the one kernel has four parameters:
// two device pointers, an int and a float.
#include <cuda.h>

#include <atomic>
#include <cstdint>

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
NULL_EXPORT CUresult cuFuncGetName(const char** name, CUfunction) {
  *name = "null_kernel_4args";
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
