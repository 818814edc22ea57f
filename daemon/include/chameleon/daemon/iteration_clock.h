// IterationClock: the time of one client's iterations, from the shim's IterationMark records.
//
// It keeps the last iteration's time (device time once the shim has reported any, host wall time
// before that) and, for layout-1.1 marks, the policy generation the shim had in force at each of
// its recent boundaries, so that an interval is credited to a generation only when that
// generation covered it whole: the mark of its first boundary says the executor installed it
// there (kFlagGenerationInstalled), or, without that flag, it was in force at both of its ends.
// Not thread-safe: only the loop thread touches it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "chameleon/ipc/event_records.h"

namespace chameleon::daemon {

class IterationClock {
 public:
  /// Takes one mark (`flags`: its record's RecordFlag bits): its boundary's generation, and the
  /// iteration time it implies.
  void OnMark(const ipc::IterationMarkRecord& mark, std::uint16_t flags = 0);

  /// The generation that covered `interval` (from boundary `interval` to `interval + 1`) whole:
  /// the one installed at its first boundary (kFlagGenerationInstalled), else the one in force at
  /// both boundaries; std::nullopt when it changed in between, the end is not marked yet (no
  /// flag) or the boundary is no longer remembered.
  std::optional<std::uint64_t> GenerationOver(std::uint64_t interval) const;
  /// The last mark's generation was installed at its boundary (the shim's executor says so).
  bool last_installed() const { return last_installed_; }
  /// Some mark carried kFlagGenerationInstalled: this shim's executor applies the policies.
  bool marks_installed() const { return marks_installed_; }
  /// The generation of the last mark.
  std::uint64_t last_generation() const { return last_generation_; }

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
    bool installed = false;  // kFlagGenerationInstalled: in force for the whole interval
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
  bool last_installed_ = false;
  bool marks_installed_ = false;
  std::uint64_t last_generation_ = 0;
};

}  // namespace chameleon::daemon
