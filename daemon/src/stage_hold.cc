#include "chameleon/daemon/stage_hold.h"

namespace chameleon::daemon {

bool StageHold::Update(std::uint64_t progress, std::uint64_t iterations, std::uint64_t now_ns,
                       bool pending) {
  if (progress != progress_ || progress_ns_ == 0) {
    progress_ = progress;
    progress_iteration_ = iterations;
    progress_ns_ = now_ns;
  }
  const bool stalled =
      iterations - progress_iteration_ > kStallIterations && now_ns - progress_ns_ > kStallNs;
  held_ = pending && !stalled;
  return held_;
}

}  // namespace chameleon::daemon
