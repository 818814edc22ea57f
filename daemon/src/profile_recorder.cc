#include "chameleon/daemon/profile_recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace chameleon::daemon {
namespace {

/// Detailed iterations requested in a row before giving up (each one lost records).
constexpr std::uint32_t kMaxDetailAttempts = 5;
/// Device-timed intervals after the detailed one whose best is the profile's iteration time: a
/// one-off host stall (first use of a resource, a synchronisation) must not become the profile's.
constexpr std::uint32_t kProfileSamples = 2;

}  // namespace

ProfileRecorder::ProfileRecorder(const ClientIdentity& who, ipc::SegmentHeader* header,
                                 const std::unordered_map<std::uint64_t, LiveAllocation>* live,
                                 const std::unordered_map<std::uint32_t, std::string>* names)
    : who_(who), header_(header), live_(live), names_(names) {}

void ProfileRecorder::Restart() {
  fresh_ = false;
  timed_ = false;
  attempts_ = 0;
  Request();
}

void ProfileRecorder::Forget() {
  if (in_progress()) {
    header_->control_flags.fetch_and(~std::uint32_t{ipc::kControlDetailedIteration},
                                     std::memory_order_acq_rel);
  }
  state_ = State::kIdle;
  profile_.reset();
  fresh_ = false;
  timed_ = false;
  attempts_ = 0;
  samples_ = 0;
  best_s_ = 0;
  early_count_ = 0;
  clock_.clear();
}

void ProfileRecorder::NewSequence(std::uint64_t boundary) {
  sample_from_ = boundary;
  fresh_ = false;
  early_count_ = 0;
  if (in_progress()) {
    header_->control_flags.fetch_and(~std::uint32_t{ipc::kControlDetailedIteration},
                                     std::memory_order_acq_rel);
    state_ = State::kIdle;
  }
}

void ProfileRecorder::Recall(std::shared_ptr<const policy::Profile> profile) {
  if (in_progress()) {
    header_->control_flags.fetch_and(~std::uint32_t{ipc::kControlDetailedIteration},
                                     std::memory_order_acq_rel);
  }
  profile_ = std::move(profile);
  state_ = profile_ ? State::kDone : State::kIdle;
  fresh_ = profile_ != nullptr;
  timed_ = fresh_;  // it was timed before anything was planned from it
  attempts_ = 0;
}

void ProfileRecorder::Resume(std::shared_ptr<const policy::Profile> profile, std::uint64_t after) {
  Recall(std::move(profile));
  timed_ = profile_ != nullptr && profile_->iteration_s > 0;  // Time() stamps a positive one
  if (!timed_) {
    detail_boundary_ = after;
    sample_from_ = after + 1;
    samples_ = 0;
    best_s_ = 0;
    early_count_ = 0;
    clock_.clear();
  }
}

void ProfileRecorder::Request() {
  if (attempts_ >= kMaxDetailAttempts) {
    spdlog::warn("client {} (pid {}): {} detailed iterations lost records; no profile this time",
                 who_.id, who_.pid, attempts_);
    state_ = State::kIdle;
    return;
  }
  ++attempts_;
  dropped_at_request_ = header_->records_dropped.load(std::memory_order_acquire);
  builder_.Begin(live_);
  state_ = State::kRequested;
  header_->detail_request_seq.fetch_add(1, std::memory_order_acq_rel);
  header_->control_flags.fetch_or(ipc::kControlDetailedIteration, std::memory_order_acq_rel);
}

void ProfileRecorder::AddOp(std::uint32_t token, std::span<const std::uint64_t> reads,
                            std::uint64_t written) {
  state_ = State::kCollecting;
  builder_.AddOp(token, reads, written);
}

void ProfileRecorder::AddAlloc(std::uint64_t id, std::uint64_t bytes, bool swappable,
                               std::uint16_t device, bool detailed) {
  if (detailed && state_ == State::kCollecting) builder_.AddAlloc(id, bytes, swappable, device);
}

void ProfileRecorder::AddFree(std::uint64_t id, bool detailed) {
  if (detailed && state_ == State::kCollecting) builder_.AddFree(id);
}

void ProfileRecorder::AddMemInfo(std::uint64_t bytes_live, bool detailed) {
  if (detailed && state_ == State::kCollecting) builder_.AddMemInfo(bytes_live);
}

void ProfileRecorder::AddOpTimes(std::span<const ipc::OpTime> times, bool detailed) {
  if (!detailed || state_ != State::kCollecting) return;
  for (const ipc::OpTime& t : times)
    builder_.SetOpTime(t.op, static_cast<double>(t.device_ns) * 1e-9);
}

void ProfileRecorder::OnMark(std::uint64_t boundary) {
  if (state_ == State::kCollecting && builder_.ops() > 0) {
    // This mark closes the detailed iteration: it ran from the previous boundary to this one.
    Finish(boundary > 0 ? boundary - 1 : 0);
  } else if (fresh_ && !timed_) {
    ++marks_since_detail_;
  }
}

void ProfileRecorder::Finish(std::uint64_t boundary) {
  detail_boundary_ = boundary;
  const std::uint64_t dropped = header_->records_dropped.load(std::memory_order_acquire);
  if (dropped != dropped_at_request_) {
    spdlog::info(
        "client {} (pid {}): {} records dropped during the detailed iteration; asking "
        "again",
        who_.id, who_.pid, dropped - dropped_at_request_);
    Request();
    return;
  }
  header_->control_flags.fetch_and(~std::uint32_t{ipc::kControlDetailedIteration},
                                   std::memory_order_acq_rel);
  auto profile = std::make_shared<policy::Profile>(
      // No iteration time yet: it is the device time of a later iteration (Time).
      builder_.Finish(
          *names_, 0.0,
          "chameleond client " + std::to_string(who_.id) + " pid " + std::to_string(who_.pid)));
  spdlog::info(
      "client {} (pid {}): detailed iteration recorded: {} ops ({} device-timed), {} tensors "
      "(boundary {}); waiting for the device time of a later iteration",
      who_.id, who_.pid, profile->ops.size(),
      std::count_if(profile->ops.begin(), profile->ops.end(),
                    [](const policy::ProfileOp& op) { return op.device_s > 0; }),
      profile->tensors.size(), detail_boundary_);
  profile_ = std::move(profile);
  fresh_ = true;
  timed_ = false;
  clock_.clear();
  marks_since_detail_ = 0;
  samples_ = 0;
  best_s_ = 0;
  state_ = State::kDone;
  TimeEarly();
}

void ProfileRecorder::TimeEarly() {
  // Intervals of the same sequence that ran before the detailed one, under no policy with swaps
  // (the timing floor): as good as the ones after it, and already measured.
  const std::size_t n = std::min(early_count_, kEarlySamples);
  for (std::size_t i = 0; i < n; ++i) {
    const EarlySample& e = early_[i];
    if (e.interval < sample_from_ || e.interval >= detail_boundary_ ||
        e.generation < timing_floor_) {
      continue;
    }
    if (samples_++ == 0 || e.seconds < best_s_) best_s_ = e.seconds;
  }
  early_count_ = 0;
  if (samples_ >= kProfileSamples) Time(best_s_, "device");
}

void ProfileRecorder::SampleInterval(std::uint64_t interval, std::uint64_t generation,
                                     double seconds, bool candidates_published) {
  if (!fresh_ && !candidates_published) {
    early_[early_count_++ % kEarlySamples] = {interval, generation, seconds};
    return;
  }
  if (!fresh_ || timed_ || candidates_published || interval <= detail_boundary_ ||
      generation < timing_floor_) {
    return;
  }
  if (samples_++ == 0 || seconds < best_s_) best_s_ = seconds;
  if (samples_ >= kProfileSamples) Time(best_s_, "device");
}

void ProfileRecorder::Time(double seconds, const char* clock) {
  auto timed = std::make_shared<policy::Profile>(*profile_);
  timed->iteration_s = seconds;
  profile_ = std::move(timed);
  timed_ = true;
  clock_ = clock;
  spdlog::info("client {} (pid {}): profile iteration time {:.6f} s ({} time)", who_.id, who_.pid,
               seconds, clock);
}

}  // namespace chameleon::daemon
