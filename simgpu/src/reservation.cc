#include "reservation.h"

#include <algorithm>

namespace chameleon::simgpu {

Location Reservation::LocationAt(std::size_t offset) {
  std::lock_guard lock(mu);
  auto it = maps.upper_bound(offset);
  if (it == maps.begin()) return {};
  --it;
  if (offset - it->first >= it->second.size) return {};
  const Chunk& c = *it->second.chunk;
  return Location{true, c.host, c.device, c.numa};
}

bool Reservation::PiecesIn(std::size_t offset, std::size_t len, std::vector<Piece>* out) {
  const std::size_t mark = out->size();
  std::lock_guard lock(mu);
  auto it = maps.upper_bound(offset);
  if (it == maps.begin()) return false;
  --it;
  for (std::size_t pos = offset; pos < offset + len; ++it) {
    if (it == maps.end() || it->first > pos || it->first + it->second.size <= pos) {
      out->resize(mark);
      return false;
    }
    const std::size_t into = pos - it->first;
    const std::size_t n = std::min(it->second.size - into, offset + len - pos);
    out->push_back(Piece{pos, n, it->second.chunk->fd,
                         it->second.chunk->base + it->second.chunk_offset + into});
    pos += n;
  }
  return true;
}

}  // namespace chameleon::simgpu
