// The objects of simulated VMM (vmm.h): physical chunks, reservations and what an offset of a
// reservation points to. Apart from vmm.h so that the address registry (registry.h), which the
// driver state holds, can classify an address inside a reservation without depending on the VMM
// calls, which depend on the driver state.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace chameleon::simgpu {

inline constexpr std::size_t kVmmGranularity = 2u << 20;  // 2 MiB, as on current GPUs
inline constexpr std::uint32_t kChunkMagic = 0x4b4e4843u;

/// Physical memory behind a CUmemGenericAllocationHandle. Thread-safe via atomics + mu.
struct Chunk {
  std::atomic<std::uint32_t> magic{kChunkMagic};
  int fd = -1;             ///< own memfd, or the location's slab (slab.h) when in_slab
  std::uint64_t base = 0;  ///< where the chunk starts in `fd` (0 unless in_slab)
  bool in_slab = false;    ///< carved from a slab: not exportable, fd not ours to close
  std::size_t size = 0;
  bool host = false;          ///< CU_MEM_LOCATION_TYPE_HOST(_NUMA): pinned host memory
  int device = -1;            ///< device ordinal (or NUMA id when host)
  int numa = -1;              ///< host: CU_MEM_LOCATION_TYPE_HOST_NUMA's node, -1 for the others
  std::uint64_t charged = 0;  ///< device bytes charged (0 for imported or host chunks)
  std::uint32_t epoch = 0;    ///< ChargeEpoch() of the charge
  CUmemAllocationProp prop{};
  std::atomic<int> refs{1};  ///< the handle + one per mapping
};

/// Where an offset of a reservation points.
struct Location {
  bool mapped = false;
  bool host = false;
  int device = -1;
  int numa = -1;  ///< host: the chunk's NUMA node, -1 local to whichever device copies
};

/// A cuMemAddressReserve range. Thread-safe (mu guards `maps`).
struct Reservation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  struct Mapping {
    std::size_t size;
    Chunk* chunk;
    std::size_t chunk_offset = 0;  ///< where in the chunk (from its base) the mapping starts
  };
  /// A mapped piece of a range: `len` bytes at reservation offset `at`, backed by `fd` from
  /// `file_offset` on.
  struct Piece {
    std::size_t at;
    std::size_t len;
    int fd;
    std::uint64_t file_offset;
  };
  std::mutex mu;
  std::map<std::size_t, Mapping> maps;  ///< by offset

  Location LocationAt(std::size_t offset);
  /// Appends the pieces that back [offset, offset + len) to `out`, in order; false (and `out`
  /// unchanged) if part of the range is not mapped.
  bool PiecesIn(std::size_t offset, std::size_t len, std::vector<Piece>* out);
};

}  // namespace chameleon::simgpu
