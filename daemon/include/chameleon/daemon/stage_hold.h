// StageHold: whether one client's stage machine holds GEN_POLICY past stage_n while its
// candidates are still being measured (docs/detection.md §4), and when a hold that makes no
// progress lets go, so that a client whose marks stop coming still reaches STABLE.
// Not thread-safe: only the loop thread touches it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chameleon::daemon {

class StageHold {
 public:
  /// GEN_POLICY steps a hold may add per candidate configuration (a last-resort bound; a stalled
  /// hold lets go earlier). Publishing, the shim's mailbox poll (2 ms until STABLE), one whole
  /// interval under the candidate and the mark that reports its device time (the host runs ahead
  /// of the device) take one iteration when the next candidate is planned ahead and the marks
  /// name the installed generation, about three without, more in a loop faster than the poll;
  /// the profile before them takes up to three more.
  static constexpr int kStepsPerCandidate = 8;
  /// A hold without progress for this many iterations *and* this long lets go. Both: a fast loop
  /// runs many iterations during the shim's mailbox poll, a slow one few in a second.
  static constexpr std::uint64_t kStallIterations = 4;
  static constexpr std::uint64_t kStallNs = 1'000'000'000;

  /// The most steps a hold may add for `configs` candidate configurations.
  static int MaxSteps(std::size_t configs) {
    return kStepsPerCandidate * static_cast<int>(configs);
  }

  /// `progress` grows with every step of profiling and measuring; `iterations` is the client's
  /// count so far; `pending`: candidates remain to be measured. Returns whether to hold now.
  bool Update(std::uint64_t progress, std::uint64_t iterations, std::uint64_t now_ns, bool pending);
  /// The last Update's answer.
  bool held() const { return held_; }

 private:
  std::uint64_t progress_ = 0;
  std::uint64_t progress_iteration_ = 0;  // iterations when progress last changed
  std::uint64_t progress_ns_ = 0;         // ... and the time (0: never updated)
  bool held_ = false;
};

}  // namespace chameleon::daemon
