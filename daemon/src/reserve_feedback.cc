#include "chameleon/daemon/reserve_feedback.h"

#include <algorithm>

namespace chameleon::daemon {
namespace {

std::uint64_t ChunksUp(std::uint64_t bytes, std::uint64_t chunk) {
  return (bytes + chunk - 1) / chunk * chunk;
}

}  // namespace

std::uint64_t ReserveFeedback::ReserveAt(std::uint32_t level, std::uint64_t base,
                                         std::uint64_t limit_bytes, std::uint64_t chunk_bytes) {
  if (chunk_bytes == 0) chunk_bytes = 1;
  // An eighth of the limit in whole chunks: past that a plan gives up more than the reserve can
  // be worth (a profile that far off is a planning bug to find, not a margin to grow).
  const std::uint64_t cap = std::max(base, limit_bytes / 8 / chunk_bytes * chunk_bytes);
  std::uint64_t reserve = base;
  for (std::uint32_t i = 0; i < level && reserve < cap; ++i) {
    reserve = std::max({2 * reserve, 4 * chunk_bytes, ChunksUp(limit_bytes / 100, chunk_bytes)});
    reserve = std::min(reserve, cap);
  }
  return reserve;
}

void ReserveFeedback::Watch(std::uint64_t generation) {
  watched_ = generation;
  intervals_under_watched_ = 0;
}

bool ReserveFeedback::OnMark(std::uint64_t generation, std::uint64_t evictions) {
  // The interval this mark ends began at the previous mark and ran under its generation (the
  // executor changes policies only at boundaries).
  const bool under_watched = seen_mark_ && watched_ != 0 && last_generation_ == watched_;
  // A count that went backwards (not to be trusted) is no eviction, and the next reference.
  const bool evicted = seen_mark_ && evictions > last_evictions_;
  seen_mark_ = true;
  last_generation_ = generation;
  last_evictions_ = evictions;
  if (!under_watched) return false;
  ++intervals_under_watched_;
  return intervals_under_watched_ >= 2 && evicted;
}

void ReserveFeedback::Raise() {
  ++level_;
  replan_wanted_ = true;
  watched_ = 0;
  intervals_under_watched_ = 0;
}

}  // namespace chameleon::daemon
