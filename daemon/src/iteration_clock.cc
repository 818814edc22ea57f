#include "chameleon/daemon/iteration_clock.h"

namespace chameleon::daemon {

void IterationClock::OnMark(const ipc::IterationMarkRecord& mark, std::uint16_t flags) {
  ++marks_;
  const bool installed = (flags & ipc::kFlagGenerationInstalled) != 0;
  last_installed_ = installed && mark.generation != 0 && mark.iteration != 0;
  last_generation_ = mark.generation;
  marks_installed_ = marks_installed_ || last_installed_;
  if (mark.generation != 0 && mark.iteration != 0) {
    carries_generation_ = true;
    generations_[mark.iteration % kMarkGenerations] = {mark.iteration, mark.generation, installed};
  }
  if (mark.device_time_ns > 0) {
    iteration_s_ = double(mark.device_time_ns) * 1e-9;
    device_time_seen_ = true;
  } else if (!device_time_seen_ && last_host_ns_ != 0 && mark.host_time_ns > last_host_ns_) {
    iteration_s_ = double(mark.host_time_ns - last_host_ns_) * 1e-9;
  }
  last_host_ns_ = mark.host_time_ns;
  last_boundary_ = mark.iteration;
}

std::optional<std::uint64_t> IterationClock::GenerationOver(std::uint64_t interval) const {
  // A candidate installed at boundary k is judged by intervals k, k + 1, ..., never by one that
  // began under its predecessor.
  const MarkGeneration& begin = generations_[interval % kMarkGenerations];
  // The executor changes policies only at boundaries: what it installed at the first one holds
  // until the next, whatever that one installs.
  if (begin.boundary == interval && begin.installed) return begin.generation;
  const MarkGeneration& end = generations_[(interval + 1) % kMarkGenerations];
  if (begin.boundary != interval || end.boundary != interval + 1 ||
      begin.generation != end.generation) {
    return std::nullopt;
  }
  return begin.generation;
}

}  // namespace chameleon::daemon
