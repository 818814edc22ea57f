// ProfileRecorder: records one client's detailed iteration into the profile its candidate
// policies are generated from, and gives that profile an iteration time.
//
// It asks the shim for a detailed iteration through the segment header, feeds the detailed
// records to a ProfileBuilder, asks again when the ring dropped records meanwhile (up to
// kMaxDetailAttempts), and then times the profile with the device time of later iterations: the
// detailed one is slowed on the host, not on the device, and its own interval may hold a one-off
// stall. Not thread-safe: only the loop thread touches it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "chameleon/daemon/client_identity.h"
#include "chameleon/daemon/profile_builder.h"
#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/segment_layout.h"
#include "chameleon/policy/profile.h"

namespace chameleon::daemon {

class ProfileRecorder {
 public:
  enum class State : std::uint8_t { kIdle, kRequested, kCollecting, kDone };

  /// All four outlive the recorder (they are its session's): `header` is where the detail
  /// request goes, `live` the allocations made before the detailed iteration, `names` the op
  /// names the profile is labelled with.
  ProfileRecorder(const ClientIdentity& who, ipc::SegmentHeader* header,
                  const std::unordered_map<std::uint64_t, LiveAllocation>* live,
                  const std::unordered_map<std::uint32_t, std::string>* names);

  /// A new stable sequence (the client entered GEN_POLICY): the profile is no longer fresh, the
  /// attempts start again and a detailed iteration is requested.
  void Restart();
  /// The iteration boundary changed: the profile (of the old iteration) is dropped, a detailed
  /// iteration in progress is called off, and nothing is fresh until the next Restart().
  void Forget();
  /// The generation published on entering GEN_POLICY: the profile is timed only by intervals
  /// run at or after it (not under the old policy).
  void SetTimingFloor(std::uint64_t generation) { timing_floor_ = generation; }

  /// A detailed op arrives while one is wanted: AddOp records it.
  bool Accepts(bool detailed) const {
    return detailed && (state_ == State::kRequested || state_ == State::kCollecting);
  }
  void AddOp(std::uint32_t token, std::span<const std::uint64_t> reads, std::uint64_t written);
  /// An op that is not detailed: if one was being collected, another thread's op came before
  /// the closing mark, and the detailed iteration ended at `last_boundary`.
  void OpOutside(std::uint64_t last_boundary) {
    if (state_ == State::kCollecting) Finish(last_boundary);
  }
  void AddAlloc(std::uint64_t id, std::uint64_t bytes, bool swappable, std::uint16_t device,
                bool detailed);
  void AddFree(std::uint64_t id, bool detailed);
  void AddMemInfo(std::uint64_t bytes_live, bool detailed);
  /// Device times of the detailed iteration's ops (kOpTimes), sent before the mark that closes it.
  void AddOpTimes(std::span<const ipc::OpTime> times, bool detailed);
  /// A mark at boundary `boundary`: it closes the detailed iteration being collected.
  void OnMark(std::uint64_t boundary);

  /// The op sequence changed (an unstable step); intervals from boundary `boundary` on are of the
  /// new one. The profile is no longer fresh, earlier intervals never time the next one, and a
  /// detailed iteration requested or being recorded (of the old sequence, or of both) is called
  /// off.
  void NewSequence(std::uint64_t boundary);
  /// A sequence seen before came back and the plan chosen for it is in force again (PlanMemory):
  /// `profile`, the one that plan was generated from, is the current sequence's again (fresh and
  /// timed, so a re-plan starts from it; nullptr: none). A detailed iteration requested meanwhile
  /// is called off.
  void Recall(std::shared_ptr<const policy::Profile> profile);
  /// A sequence whose planning was cut short came back (PlanMemory): `profile`, recorded for it
  /// before, is the current sequence's again. Timed (an iteration time) it is ready to plan
  /// from; otherwise it is timed by the intervals after boundary `after`, as after its detailed
  /// iteration. A detailed iteration requested meanwhile is called off.
  void Resume(std::shared_ptr<const policy::Profile> profile, std::uint64_t after);
  /// A device-timed interval credited to `generation`: one of the kProfileSamples whose best is
  /// the profile's iteration time, while no candidate was published from it yet. Intervals that
  /// ran before the detailed one (same sequence, at or above the timing floor) count too, so a
  /// profile can be timed as soon as it is recorded.
  void SampleInterval(std::uint64_t interval, std::uint64_t generation, double seconds,
                      bool candidates_published);
  /// Stamps the profile's iteration time, measured in `clock` ("device" or "host").
  void Time(double seconds, const char* clock);

  State state() const { return state_; }
  /// Requested or collecting: the profile is on its way.
  bool in_progress() const { return state_ == State::kRequested || state_ == State::kCollecting; }
  const std::shared_ptr<const policy::Profile>& profile() const { return profile_; }
  /// Recorded for the current stable sequence (since its first stable step).
  bool fresh() const { return fresh_; }
  /// The profile has its iteration time: candidates may be generated from it.
  bool timed() const { return timed_; }
  const std::string& clock() const { return clock_; }
  std::uint32_t marks_since_detail() const { return marks_since_detail_; }
  /// Grows with each step towards a timed profile (the stage hold's progress measure).
  std::uint64_t progress() const {
    return 4 * attempts_ + static_cast<std::uint64_t>(state_) + (timed_ ? 1 : 0);
  }

 private:
  void Request();
  /// The detailed iteration ended (it began at `boundary`): a profile, or another request when
  /// records were dropped meanwhile.
  void Finish(std::uint64_t boundary);

  const ClientIdentity& who_;
  ipc::SegmentHeader* header_;
  const std::unordered_map<std::uint64_t, LiveAllocation>* live_;
  const std::unordered_map<std::uint32_t, std::string>* names_;
  State state_ = State::kIdle;
  std::uint32_t attempts_ = 0;
  std::uint64_t dropped_at_request_ = 0;
  ProfileBuilder builder_;
  std::shared_ptr<const policy::Profile> profile_;
  bool fresh_ = false;
  bool timed_ = false;
  std::uint64_t detail_boundary_ = 0;  // shim boundary that began the detailed iteration
  std::uint64_t timing_floor_ = 0;     // see SetTimingFloor
  std::uint32_t marks_since_detail_ = 0;
  /// Device-timed intervals seen while no fresh profile existed (the last few), for TimeEarly.
  struct EarlySample {
    std::uint64_t interval = 0;
    std::uint64_t generation = 0;
    double seconds = 0;
  };
  static constexpr std::size_t kEarlySamples = 8;
  /// At Finish: the early samples that may time the new profile become its first samples.
  void TimeEarly();
  std::array<EarlySample, kEarlySamples> early_{};
  std::size_t early_count_ = 0;    // samples written to early_ (ring position = count % size)
  std::uint64_t sample_from_ = 0;  // see NewSequence
  std::uint32_t samples_ = 0;      // device-timed intervals seen for the profile
  double best_s_ = 0;
  std::string clock_;  // "device" or "host" (no device time from this shim)
};

}  // namespace chameleon::daemon
