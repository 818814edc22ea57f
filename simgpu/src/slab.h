// Carves non-exportable VMM chunks out of one large sparse memfd per memory location, so that the
// number of chunks a process holds is not bounded by RLIMIT_NOFILE, and consecutively created
// chunks get contiguous file offsets (their mappings can merge into one VMA under
// vm.max_map_count).
#pragma once

#include <cstddef>
#include <cstdint>

namespace chameleon::simgpu {

/// A piece of a slab: `size` bytes of memfd `fd` from offset `base`.
struct SlabRange {
  int fd = -1;
  std::uint64_t base = 0;
};

/// Process-wide first-fit allocator over the offsets of per-location slab memfds. Thread-safe
/// (one mutex). A child after fork() gets slabs of its own: the inherited ones belong to the
/// parent, whose memory a child must neither hand out again nor punch.
class Slabs {
 public:
  /// Takes `size` bytes for location (host, id); false when the memfd cannot be created or the
  /// slab is full (the caller then gives the chunk a memfd of its own).
  static bool Take(bool host, int id, std::size_t size, SlabRange* out);
  /// Gives a range back: its pages are punched out (so the memory really goes) and its offsets
  /// coalesce with free neighbours.
  static void Give(const SlabRange& range, std::size_t size);
};

}  // namespace chameleon::simgpu
