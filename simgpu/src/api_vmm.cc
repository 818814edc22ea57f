// Virtual memory management entry points (logic in vmm.cc).
#include "api.h"
#include "vmm.h"

using namespace chameleon::simgpu;

#define SIMGPU_REQUIRE_INIT() \
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED

SIMGPU_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                        CUdeviceptr addr, unsigned long long flags) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return VmmReserve(ptr, size, alignment, addr);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  return VmmFree(ptr, size);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                const CUmemAllocationProp* prop, unsigned long long flags) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return VmmCreate(handle, size, prop);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  return VmmRelease(handle);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return VmmMap(ptr, size, offset, handle);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  return VmmUnmap(ptr, size);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                   size_t count) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  return VmmSetAccess(ptr, size, desc, count);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                   CUdeviceptr ptr) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  int device = -1;
  Place p = TheDriver()->registry.Classify(ptr, &device);
  *flags = p == Place::kDevice || p == Place::kPinnedHost ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                                          : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                  const CUmemAllocationProp* prop,
                                                  CUmemAllocationGranularity_flags) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  Chunk* c = AsChunk(handle);
  if (!prop || !c) return CUDA_ERROR_INVALID_VALUE;
  *prop = c->prop;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemExportToShareableHandle(void* out, CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType type,
                                                 unsigned long long flags) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return VmmExport(out, handle, type);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                   void* os_handle,
                                                   CUmemAllocationHandleType type) try {
  SIMGPU_ENTRY();
  SIMGPU_REQUIRE_INIT();
  return VmmImport(handle, os_handle, type);
}
SIMGPU_CATCH
