// Virtual memory management by mmap: a reservation is a PROT_NONE range, a physical chunk is a
// memfd charged against its device's capacity, mapping puts the memfd into the range (MAP_FIXED |
// MAP_SHARED), unmapping puts PROT_NONE back. Touching unmapped memory therefore faults.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "reservation.h"

namespace chameleon::simgpu {

CUresult VmmReserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr hint);
CUresult VmmFree(CUdeviceptr ptr, std::size_t size);
CUresult VmmCreate(CUmemGenericAllocationHandle* handle, std::size_t size,
                   const CUmemAllocationProp* prop);
CUresult VmmRelease(CUmemGenericAllocationHandle handle);
CUresult VmmMap(CUdeviceptr ptr, std::size_t size, std::size_t offset,
                CUmemGenericAllocationHandle handle);
CUresult VmmUnmap(CUdeviceptr ptr, std::size_t size);
CUresult VmmSetAccess(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc,
                      std::size_t count);
CUresult VmmExport(void* out, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type);
CUresult VmmImport(CUmemGenericAllocationHandle* handle, void* os_handle,
                   CUmemAllocationHandleType type);
Chunk* AsChunk(CUmemGenericAllocationHandle handle);

}  // namespace chameleon::simgpu
