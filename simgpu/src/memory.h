// Plain device allocations (cuMemAlloc*, stream-ordered pools) and pinned host memory, all backed
// by anonymous mmap so device memory is committed lazily and freed memory really goes away.
#pragma once

#include <atomic>
#include <cstdint>

#include "driver.h"

namespace chameleon::simgpu {

inline constexpr std::uint32_t kPoolMagic = 0x4c4f4f50u;

/// A CUmemoryPool. No caching: freed blocks go straight back (docs/simgpu.md). Thread-safe.
struct MemPool {
  std::atomic<std::uint32_t> magic{kPoolMagic};
  int device = 0;
  std::atomic<std::uint64_t> release_threshold{0};
  std::atomic<std::uint64_t> used{0};
  std::atomic<std::uint64_t> used_high{0};
};

MemPool* DefaultPool(int device);
MemPool* AsPool(CUmemoryPool h);

/// Allocates `bytes` on `dev` (capacity-checked); `pool` non-null for stream-ordered allocations.
CUresult AllocDevice(Device* dev, std::size_t bytes, MemPool* pool, CUdeviceptr* out);
/// Frees a device allocation by base address (host-synchronising variant: caller syncs first).
CUresult FreeDevice(CUdeviceptr ptr);

}  // namespace chameleon::simgpu
