#include "written_extents.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace chameleon::simgpu {
namespace {

constexpr std::uint64_t kPresent = 1ull << 63;  // pagemap: page present in RAM
constexpr std::uint64_t kSwapped = 1ull << 62;  // pagemap: page in swap
// Entries read per pread: 8192 entries (64 KiB on the stack) cover 32 MiB of address space, so an
// 8 GiB range takes 256 reads.
constexpr std::size_t kBatch = 8192;

// /proc/self/pagemap names the process that opened it, so a descriptor inherited over fork()
// would read the parent's page tables: the descriptor is cached with the pid that opened it.
// Packed into one atomic (pid << 32 | fd) because a lock could be inherited held by fork().
std::atomic<std::uint64_t> g_pagemap{0};

int PagemapFd() {
  const auto pid = static_cast<std::uint32_t>(getpid());
  const std::uint64_t cur = g_pagemap.load(std::memory_order_acquire);
  if (cur != 0 && cur >> 32 == pid) return static_cast<int>(cur & 0xffffffffu);
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const std::uint64_t mine = std::uint64_t{pid} << 32 | static_cast<std::uint32_t>(fd);
  std::uint64_t expected = cur;
  if (g_pagemap.compare_exchange_strong(expected, mine, std::memory_order_acq_rel)) {
    if (cur != 0) close(static_cast<int>(cur & 0xffffffffu));  // the parent's, useless here
    return fd;
  }
  close(fd);  // another thread of this process won the race
  return expected >> 32 == pid ? static_cast<int>(expected & 0xffffffffu) : -1;
}

// Appends [begin, end) to `out`, merging with the last extent when they touch.
void Append(std::vector<Extent>* out, std::uintptr_t begin, std::uintptr_t end) {
  if (begin >= end) return;
  if (!out->empty() && out->back().end == begin) {
    out->back().end = end;
  } else {
    out->push_back(Extent{begin, end});
  }
}

}  // namespace

std::size_t WrittenExtents::PageSize() {
  static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

bool WrittenExtents::ScanAnonymous(std::uintptr_t addr, std::size_t len, std::vector<Extent>* out) {
  if (len == 0) return true;
  const int fd = PagemapFd();
  if (fd < 0) return false;
  const std::size_t page = PageSize();
  const std::uintptr_t end = addr + len;
  const std::uintptr_t first = addr / page;
  const std::uintptr_t last = (end + page - 1) / page;  // exclusive
  const std::size_t mark = out->size();
  std::uint64_t entries[kBatch];
  for (std::uintptr_t at = first; at < last;) {
    const std::size_t want = std::min<std::uintptr_t>(kBatch, last - at);
    const ssize_t got =
        pread(fd, entries, want * sizeof entries[0], static_cast<off_t>(at * sizeof entries[0]));
    if (got <= 0 || got % sizeof entries[0] != 0) {
      out->resize(mark);
      return false;
    }
    const std::size_t n = static_cast<std::size_t>(got) / sizeof entries[0];
    for (std::size_t i = 0; i < n; ++i) {
      if (!(entries[i] & (kPresent | kSwapped))) continue;
      const std::uintptr_t p = (at + i) * page;
      Append(out, std::max(p, addr), std::min(p + page, end));
    }
    at += n;
  }
  return true;
}

bool WrittenExtents::ScanMemfd(int fd, std::uint64_t file_offset, std::uintptr_t addr,
                               std::size_t len, std::vector<Extent>* out) {
  const std::size_t mark = out->size();
  const auto end = static_cast<off_t>(file_offset + len);
  for (auto pos = static_cast<off_t>(file_offset); pos < end;) {
    const off_t data = lseek(fd, pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // no data at or after pos
    if (data < 0) {
      out->resize(mark);
      return false;
    }
    if (data >= end) break;
    off_t hole = lseek(fd, data, SEEK_HOLE);
    if (hole < 0) {
      out->resize(mark);
      return false;
    }
    hole = std::min(hole, end);
    Append(out, addr + static_cast<std::uintptr_t>(data) - file_offset,
           addr + static_cast<std::uintptr_t>(hole) - file_offset);
    pos = hole;
  }
  return true;
}

}  // namespace chameleon::simgpu
