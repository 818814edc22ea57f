// SwapTraffic: the bytes one client's swap executor moved between consecutive boundary marks, so
// that a profile timed while the shim's safety net swaps (no policy yet, but a device limit) can
// be given its compute time: the simulator adds the plan's own stalls to the profile's time, and
// a time that already holds the safety net's transfers would count transfers twice (issue 18:
// 22.4 ms predicted against 13.0 ms measured on the demo at peak / 4).
//
// The executor's cumulative byte counters are read from the segment header at each mark. They
// are published by the shim's 10 ms tick, so both ends of an interval lag alike and the
// difference is the traffic of about that interval. Not thread-safe: only the loop thread
// touches it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace chameleon::daemon {

class SwapTraffic {
 public:
  struct Moved {
    std::uint64_t out_bytes = 0;  ///< device -> host
    std::uint64_t in_bytes = 0;   ///< host -> device
  };

  /// The mark of boundary `boundary` arrived while the header said `out_bytes` / `in_bytes` in
  /// total.
  void OnMark(std::uint64_t boundary, std::uint64_t out_bytes, std::uint64_t in_bytes);
  /// Bytes moved from boundary `interval` to `interval + 1`; std::nullopt when either end is
  /// not remembered or the counters went backwards (a client not to be trusted with a figure).
  std::optional<Moved> During(std::uint64_t interval) const;
  /// The transfer time of `moved` over a link of `out_bytes_per_s` device -> host and
  /// `in_bytes_per_s` host -> device (the safety net's copies wait for each other and for
  /// compute: nothing overlaps them). A direction without a positive figure adds nothing.
  static double Seconds(const Moved& moved, double out_bytes_per_s, double in_bytes_per_s);

 private:
  /// As IterationClock's: a device time is reported a few boundaries after its interval.
  static constexpr std::size_t kMarks = 64;
  struct Sample {
    std::uint64_t boundary = 0;
    std::uint64_t out_bytes = 0;
    std::uint64_t in_bytes = 0;
  };
  std::array<Sample, kMarks> samples_{};
};

}  // namespace chameleon::daemon
