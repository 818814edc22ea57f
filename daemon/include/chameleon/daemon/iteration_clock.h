// IterationClock: the time of one client's iterations, from the shim's IterationMark records.
//
// It keeps the last iteration's time (device time once the shim has reported any, host wall time
// before that) and, for layout-1.1 marks, the policy generation the shim had in force at each of
// its recent boundaries, so that an interval is credited to a generation only when that
// generation was in force at both of its ends. Not thread-safe: only the loop thread touches it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "chameleon/ipc/event_records.h"

namespace chameleon::daemon {

class IterationClock {
 public:
  /// Takes one mark: its boundary's generation, and the iteration time it implies.
  void OnMark(const ipc::IterationMarkRecord& mark);

  /// The generation in force at both boundaries of `interval` (from boundary `interval` to
  /// `interval + 1`); std::nullopt when it changed in between or is no longer remembered.
  std::optional<std::uint64_t> GenerationOver(std::uint64_t interval) const;

  std::uint64_t marks() const { return marks_; }
  /// The last iteration's time in seconds (0 until a mark gave one).
  double iteration_s() const { return iteration_s_; }
  /// The shim has reported a device-timed iteration: host wall time is never used again.
  bool device_time_seen() const { return device_time_seen_; }
  /// The shim's marks carry the generation in force (layout 1.1): intervals are attributable.
  bool carries_generation() const { return carries_generation_; }
  /// Boundary index of the last mark.
  std::uint64_t last_boundary() const { return last_boundary_; }

 private:
  /// Boundaries remembered for GenerationOver (indexed by boundary modulo the size): the mark
  /// that reports an interval's device time comes a few boundaries after the interval.
  static constexpr std::size_t kMarkGenerations = 64;
  struct MarkGeneration {
    std::uint64_t boundary = 0;
    std::uint64_t generation = 0;
  };

  std::uint64_t marks_ = 0;
  std::uint64_t last_host_ns_ = 0;
  std::uint64_t last_boundary_ = 0;
  /// Mixing device and host time would compare a policy's prediction with a measurement in
  /// another clock.
  bool device_time_seen_ = false;
  double iteration_s_ = 0;
  std::array<MarkGeneration, kMarkGenerations> generations_{};
  bool carries_generation_ = false;
};

}  // namespace chameleon::daemon
