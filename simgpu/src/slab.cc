#include "slab.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace chameleon::simgpu {
namespace {

// Sparse, so the size costs nothing until pages are written; capacity is charged per chunk.
constexpr std::uint64_t kSlabBytes = std::uint64_t{1} << 46;  // 64 TiB of offsets

struct Slab {
  int fd = -1;
  pid_t owner = 0;
  std::map<std::uint64_t, std::uint64_t> free;  ///< offset -> length, non-adjacent
};

std::mutex g_mu;
// Never freed: a chunk may be released from an atexit handler after static destruction.
auto* g_slabs = new std::map<std::pair<bool, int>, Slab>;  // by location
auto* g_by_fd = new std::map<int, Slab*>;                  // slabs of this process, by fd

Slab* SlabFor(bool host, int id) {
  Slab& s = (*g_slabs)[{host, id}];
  if (s.fd >= 0 && s.owner == getpid()) return &s;
  // First use, or inherited across fork(): the old fd stays open for the inherited mappings'
  // chunks, which DropRef closes nothing of; this process starts a slab of its own.
  g_by_fd->erase(s.fd);
  const std::string name = (host ? "simgpu-slab-host" : "simgpu-slab-dev") + std::to_string(id);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  if (ftruncate(fd, static_cast<off_t>(kSlabBytes)) != 0) {
    close(fd);
    return nullptr;
  }
  s.fd = fd;
  s.owner = getpid();
  s.free.clear();
  s.free.emplace(0, kSlabBytes);
  (*g_by_fd)[fd] = &s;
  return &s;
}

}  // namespace

bool Slabs::Take(bool host, int id, std::size_t size, SlabRange* out) {
  std::lock_guard lock(g_mu);
  Slab* s = SlabFor(host, id);
  if (!s) return false;
  // First fit from the lowest offset keeps consecutive chunks adjacent in the file.
  for (auto it = s->free.begin(); it != s->free.end(); ++it) {
    if (it->second < size) continue;
    const std::uint64_t base = it->first;
    const std::uint64_t rest = it->second - size;
    s->free.erase(it);
    if (rest) s->free.emplace(base + size, rest);
    *out = SlabRange{s->fd, base};
    return true;
  }
  return false;
}

void Slabs::Give(const SlabRange& range, std::size_t size) {
  std::lock_guard lock(g_mu);
  auto found = g_by_fd->find(range.fd);
  // A range of a slab inherited across fork() is the parent's memory: leave it alone.
  if (found == g_by_fd->end() || found->second->owner != getpid()) return;
  Slab* s = found->second;
  if (fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(range.base),
                static_cast<off_t>(size)) != 0)
    return;  // keep the pages out of circulation rather than hand out non-zero memory
  std::uint64_t base = range.base;
  std::uint64_t len = size;
  auto next = s->free.lower_bound(base);
  if (next != s->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == base) {
      base = prev->first;
      len += prev->second;
      s->free.erase(prev);
    }
  }
  if (next != s->free.end() && next->first == range.base + size) {
    len += next->second;
    s->free.erase(next);
  }
  s->free.emplace(base, len);
}

}  // namespace chameleon::simgpu
