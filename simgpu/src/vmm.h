// Virtual memory management by mmap: a reservation is a PROT_NONE range, a physical chunk is a
// memfd charged against its device's capacity, mapping puts the memfd into the range (MAP_FIXED |
// MAP_SHARED), unmapping puts PROT_NONE back. Touching unmapped memory therefore faults.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace chameleon::simgpu {

inline constexpr std::size_t kVmmGranularity = 2u << 20;  // 2 MiB, as on current GPUs
inline constexpr std::uint32_t kChunkMagic = 0x4b4e4843u;

/// Physical memory behind a CUmemGenericAllocationHandle. Thread-safe via atomics + mu.
struct Chunk {
  std::atomic<std::uint32_t> magic{kChunkMagic};
  int fd = -1;
  std::size_t size = 0;
  bool host = false;          ///< CU_MEM_LOCATION_TYPE_HOST(_NUMA): pinned host memory
  int device = -1;            ///< device ordinal (or NUMA id when host)
  std::uint64_t charged = 0;  ///< device bytes charged (0 for imported or host chunks)
  CUmemAllocationProp prop{};
  std::atomic<int> refs{1};  ///< the handle + one per mapping
};

/// Where an offset of a reservation points.
struct Location {
  bool mapped = false;
  bool host = false;
  int device = -1;
};

/// A cuMemAddressReserve range. Thread-safe (mu guards `maps`).
struct Reservation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  struct Mapping {
    std::size_t size;
    Chunk* chunk;
  };
  std::mutex mu;
  std::map<std::size_t, Mapping> maps;  ///< by offset

  Location LocationAt(std::size_t offset);
};

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
