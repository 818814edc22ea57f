// Which bytes of simulated memory hold written data, derived from the host kernel's page state
// rather than tracked on every write: kernels are host functions that write through the mapping,
// so simgpu cannot see their stores, but the host kernel can (a page nobody wrote is not mapped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chameleon::simgpu {

/// A byte range [begin, end) of the address space.
struct Extent {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
};

/// Finds the written extents of a range of private anonymous memory (from /proc/self/pagemap:
/// a page counts as written when it is present or swapped out) or of a memfd mapping (from
/// lseek SEEK_DATA/SEEK_HOLE on the file: pages in the page cache or in swap). Extents are whole
/// pages clipped to the range; a page that was only read may count as written (the kernel mapped
/// the zero page), never the reverse. Stateless apart from the pagemap descriptor, which it
/// reopens after fork(); thread-safe.
class WrittenExtents {
 public:
  /// Host page size (4 KiB on x86-64): the granule of every extent.
  static std::size_t PageSize();
  /// Appends the written extents of [addr, addr + len) of a private anonymous mapping to `out`,
  /// in address order. False if the page state cannot be read (then `out` is unchanged).
  static bool ScanAnonymous(std::uintptr_t addr, std::size_t len, std::vector<Extent>* out);
  /// The same for [addr, addr + len), a mapping of `fd` at file offset `file_offset`.
  static bool ScanMemfd(int fd, std::uint64_t file_offset, std::uintptr_t addr, std::size_t len,
                        std::vector<Extent>* out);
};

}  // namespace chameleon::simgpu
