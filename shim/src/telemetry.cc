#include "telemetry.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "log.h"

namespace chameleon::shim {
namespace {

std::uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// Framing of a staged record (process-local memory, never shared).
struct StagedHeader {
  std::uint16_t type;
  std::uint16_t flags;
  std::uint32_t bytes;  // payload bytes that follow
};

}  // namespace

bool Telemetry::StageLocked(ipc::RecordType type, std::uint16_t flags, const void* head,
                            std::size_t hb, const void* tail, std::size_t tb) {
  const std::size_t need = sizeof(StagedHeader) + hb + tb;
  if (need > staging_.size - staging_used_) {
    // Full: the staged stream can no longer be complete. Drop it and stop recording; the attach
    // announces the live allocations instead (the ops so far are lost, and counted).
    staging_on_ = false;
    active_.store(false, std::memory_order_relaxed);
    staging_lost_.fetch_add(staging_records_ + 1, std::memory_order_relaxed);
    dropped_.fetch_add(staging_records_ + 1, std::memory_order_relaxed);
    return false;
  }
  std::uint8_t* p = staging_.data.get() + staging_used_;
  const StagedHeader h{static_cast<std::uint16_t>(type), flags,
                       static_cast<std::uint32_t>(hb + tb)};
  std::memcpy(p, &h, sizeof(h));
  if (hb != 0) std::memcpy(p + sizeof(h), head, hb);
  if (tb != 0) std::memcpy(p + sizeof(h) + hb, tail, tb);
  staging_used_ += need;
  ++staging_records_;
  return true;
}

bool Telemetry::ReplayStagingLocked() {
  if (!staging_on_) return false;
  std::size_t at = 0;
  while (at + sizeof(StagedHeader) <= staging_used_) {
    StagedHeader h{};
    std::memcpy(&h, staging_.data.get() + at, sizeof(h));
    PushLocked(static_cast<ipc::RecordType>(h.type), h.flags, staging_.data.get() + at + sizeof(h),
               h.bytes, nullptr, 0);
    at += sizeof(h) + h.bytes;
  }
  return true;
}

Telemetry::StagingBuffer Telemetry::TakeStagingLocked() {
  staging_on_ = false;
  staging_used_ = 0;
  staging_records_ = 0;
  return std::exchange(staging_, StagingBuffer{});
}

void Telemetry::StopStaging() {
  lock_.Lock();
  if (staging_on_) {
    staging_lost_.fetch_add(staging_records_, std::memory_order_relaxed);
    dropped_.fetch_add(staging_records_, std::memory_order_relaxed);
  }
  if (!ring_valid_) active_.store(false, std::memory_order_relaxed);
  StagingBuffer staged = TakeStagingLocked();
  lock_.Unlock();
}

inline bool Telemetry::PushOpRecordLocked(ipc::RecordType type, std::uint16_t flags,
                                          const void* head, std::size_t hb, const void* tail,
                                          std::size_t tb) {
  if (tail != nullptr && tb != 0) return PushLocked(type, flags, head, hb, tail, tb);
  // With a constant size the ring's copy is a few moves instead of a call into libc's memcpy:
  // launches naming up to 4 tensors (16 + 8 per tensor bytes), most of them, get one.
  switch (hb) {
    case 16:
      return PushLocked(type, flags, head, 16, nullptr, 0);
    case 24:
      return PushLocked(type, flags, head, 24, nullptr, 0);
    case 32:
      return PushLocked(type, flags, head, 32, nullptr, 0);
    case 40:
      return PushLocked(type, flags, head, 40, nullptr, 0);
    case 48:
      return PushLocked(type, flags, head, 48, nullptr, 0);
    default:
      return PushLocked(type, flags, head, hb, nullptr, 0);
  }
}

bool Telemetry::PushOp(ipc::RecordType type, std::uint32_t token, std::uint16_t device,
                       const void* head, std::size_t head_bytes, const void* tail,
                       std::size_t tail_bytes, bool capture, BoundaryHit* hit,
                       swap::OccurrenceTicket* ticket, std::uint32_t* detailed_op) {
  *detailed_op = OpTimer::kNotDetailed;
  if (!lock_.TryLockBounded()) {
    if (!attaching_.load(std::memory_order_relaxed)) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    lock_.Lock();  // once per connection, bounded by the staged records' copy
  }
  const std::uint16_t flags = static_cast<std::uint16_t>((detailed_ ? ipc::kFlagDetailed : 0) |
                                                         (capture ? ipc::kFlagCapture : 0));
  const bool pushed = PushOpRecordLocked(type, flags, head, head_bytes, tail, tail_bytes);
  if (__builtin_expect(detailed_, 0) && pushed) {
    // The daemon's profile numbers the detailed op records in ring order, capture ones included.
    *detailed_op = detailed_ops_++;
    if (!capture && device_live_ != nullptr) {
      ipc::MemInfoRecord info{};
      info.device = device;
      info.bytes_live = device_live_[device < 64 ? device : 0].load(std::memory_order_relaxed);
      PushLocked(ipc::RecordType::kMemInfo, ipc::kFlagDetailed, &info, sizeof(info), nullptr, 0);
    }
  }
  bool boundary = false;
  if (!capture) {
    // Count and match even a dropped op: the program did issue it.
    ++ops_in_iteration_;
    swap::OccurrenceCounter* const occurrences = occurrences_.load(std::memory_order_acquire);
    if (occurrences != nullptr) occurrences->CountInto(token, ticket);
    if (matcher_.Step(token)) {
      // The daemon's rule (IterationTracker): an occurrence less than half an iteration after
      // the last boundary is an inserted op, not a boundary. Both sides must cut alike, or the
      // detailed iteration the daemon asked for ends early.
      if (2 * ops_in_iteration_ < last_iteration_ops_) {
        ++ignored_matches_;
      } else {
        *hit = StepIteration(token);
        if (occurrences != nullptr) occurrences->NextEpoch();
        boundary = true;
      }
    }
  }
  lock_.Unlock();
  return boundary;
}

BoundaryHit Telemetry::StepIteration(std::uint32_t /*token*/) {
  BoundaryHit hit;
  hit.hit = true;
  hit.iteration = ++iteration_;
  hit.ops = ops_in_iteration_;
  // The first boundary after a new signature closes a partial stretch, not an iteration.
  last_iteration_ops_ = boundary_seen_ ? ops_in_iteration_ : 0;
  boundary_seen_ = true;
  ops_in_iteration_ = 0;
  if (header_ != nullptr) {
    hit.generation = header_->policy_generation_applied.load(std::memory_order_relaxed);
  }
  iterations_.store(iteration_, std::memory_order_relaxed);
  if (detailed_) {
    // The detailed iteration ends here; the daemon learns it through detail_done_seq.
    detailed_ = false;
    detail_done_.store(detailed_seq_, std::memory_order_relaxed);
    if (header_ != nullptr)
      header_->detail_done_seq.store(detailed_seq_, std::memory_order_release);
    op_timer_.Close();
    hit.detail_ended = true;
  }
  const std::uint32_t requested = detail_requested_.load(std::memory_order_relaxed);
  if (requested != 0 && requested > detail_done_.load(std::memory_order_relaxed)) {
    detailed_ = true;
    detailed_seq_ = requested;
    detailed_ops_ = 0;
    op_timer_.Open();
  }
  return hit;
}

void Telemetry::PushEvent(ipc::RecordType type, const void* payload, std::size_t bytes) {
  lock_.Lock();
  PushLocked(type, detailed_ ? ipc::kFlagDetailed : 0, payload, bytes, nullptr, 0);
  lock_.Unlock();
}

TimedInterval Telemetry::BoundaryDeviceTime(const BoundaryHit& hit, CUstream stream,
                                            bool capturing) {
  const std::uint64_t boundary = hit.iteration;
  if (capturing || aux_ == nullptr || aux_->event_create == nullptr ||
      aux_->event_record == nullptr || aux_->event_query == nullptr ||
      aux_->event_elapsed_time == nullptr) {
    return {};
  }
  std::unique_lock<std::mutex> lock(events_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return {};
  const int slot = static_cast<int>(boundary % kEventSlots);
  if (events_[slot] == nullptr &&
      aux_->event_create(&events_[slot], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    events_[slot] = nullptr;
  }
  const bool recorded =
      events_[slot] != nullptr && aux_->event_record(events_[slot], stream) == CUDA_SUCCESS;
  event_boundary_[slot] = recorded ? boundary : 0;
  wait_at_[slot] = hit.executor_wait_measured ? std::optional(hit.executor_wait_ns) : std::nullopt;
  return NewestCompletedLocked(boundary);
}

// The interval that just ended is usually still in flight (the host runs ahead), so report the
// newest interval whose end event has completed, queried without blocking, that was not
// reported before. docs/shim.md and docs/detection.md describe how the daemon uses it.
TimedInterval Telemetry::NewestCompletedLocked(std::uint64_t boundary) {
  for (std::uint64_t end = boundary;
       end >= 2 && end > last_timed_ + 1 && end + kEventSlots > boundary + 1; --end) {
    const int s_end = static_cast<int>(end % kEventSlots);
    const int s_begin = static_cast<int>((end - 1) % kEventSlots);
    if (event_boundary_[s_end] != end || event_boundary_[s_begin] != end - 1) continue;
    if (aux_->event_query(events_[s_end]) != CUDA_SUCCESS) continue;
    float ms = 0;
    if (aux_->event_elapsed_time(&ms, events_[s_begin], events_[s_end]) != CUDA_SUCCESS || ms < 0) {
      continue;
    }
    last_timed_ = end - 1;
    TimedInterval timed{end - 1, static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6), {}};
    const std::optional<std::uint64_t>& w_begin = wait_at_[s_begin];
    const std::optional<std::uint64_t>& w_end = wait_at_[s_end];
    if (w_begin && w_end && *w_end >= *w_begin) timed.executor_wait_ns = *w_end - *w_begin;
    return timed;
  }
  return {};
}

void Telemetry::PushOpTimes() {
  // Waits for the device to run the iteration's last ops: once per detailed iteration.
  const std::vector<ipc::OpTime> times = op_timer_.Collect();
  std::size_t at = 0;
  lock_.Lock();
  while (at < times.size()) {
    const std::size_t n = std::min(times.size() - at, ipc::kMaxOpTimesPerRecord);
    ipc::OpTimesRecord rec{};
    rec.count = static_cast<std::uint32_t>(n);
    PushLocked(ipc::RecordType::kOpTimes, ipc::kFlagDetailed, &rec, sizeof(rec), times.data() + at,
               n * sizeof(ipc::OpTime));
    at += n;
  }
  lock_.Unlock();
}

void Telemetry::FinishBoundary(const BoundaryHit& hit, CUstream stream, bool stream_capturing) {
  if (hit.detail_ended && !stream_capturing) PushOpTimes();
  ipc::IterationMarkRecord mark{};
  mark.iteration = hit.iteration;
  mark.host_time_ns = MonotonicNs();
  const TimedInterval timed = BoundaryDeviceTime(hit, stream, stream_capturing);
  mark.device_time_ns = timed.device_ns;
  mark.timed_iteration = timed.iteration;
  std::uint16_t flags = hit.flags;
  if (timed.executor_wait_ns) {
    mark.executor_wait_ns = *timed.executor_wait_ns;
    flags = static_cast<std::uint16_t>(flags | ipc::kFlagExecutorWait);
  }
  mark.ops = hit.ops;
  mark.generation = hit.generation;
  lock_.Lock();
  PushLocked(ipc::RecordType::kIterationMark, flags, &mark, sizeof(mark), nullptr, 0);
  lock_.Unlock();
}

void Telemetry::Detach() {
  lock_.Lock();
  active_.store(false, std::memory_order_relaxed);
  ring_valid_ = false;
  header_ = nullptr;
  detailed_ = false;
  op_timer_.Close();
  lock_.Unlock();
}

void Telemetry::SetBoundary(const std::vector<std::uint32_t>& tokens) {
  lock_.Lock();
  // Every policy carries the signature; only a different one restarts matching (resetting on
  // each candidate would lose the boundary in progress and the iteration's op count).
  if (tokens != signature_) {
    signature_ = tokens;
    matcher_.SetSignature(tokens);
    ops_in_iteration_ = 0;
    last_iteration_ops_ = 0;
    boundary_seen_ = false;
  }
  lock_.Unlock();
}

void Telemetry::ResetForChild() {
  lock_.ResetForChild();
  active_.store(false, std::memory_order_relaxed);
  occurrences_.store(nullptr, std::memory_order_relaxed);  // the parent's executor's
  ring_valid_ = false;
  staging_on_ = false;  // the parent's staged records are the parent's
  staging_used_ = 0;
  staging_records_ = 0;
  header_ = nullptr;
  detailed_ = false;
  op_timer_.ResetForChild();
  iteration_ = 0;
  ops_in_iteration_ = 0;
  last_iteration_ops_ = 0;
  boundary_seen_ = false;
  last_timed_ = 0;
  new (&events_mu_) std::mutex();  // the parent may have held it at fork time
  for (int i = 0; i < kEventSlots; ++i) {
    events_[i] = nullptr;  // the child has no CUDA context; never touch the parent's events
    event_boundary_[i] = 0;
  }
}

}  // namespace chameleon::shim
