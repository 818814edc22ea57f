#include "telemetry.h"

#include <time.h>

#include <new>

#include "log.h"

namespace chameleon::shim {
namespace {

std::uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

bool Telemetry::PushLocked(ipc::RecordType type, std::uint16_t flags, const void* head,
                           std::size_t hb, const void* tail, std::size_t tb) {
  if (!ring_valid_) return false;
  const ipc::PushResult r = tail == nullptr || tb == 0
                                ? producer_.Push(type, flags, head, hb)
                                : producer_.Push2(type, flags, head, hb, tail, tb);
  if (r == ipc::PushResult::kOk) {
    written_.store(written_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return true;
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

BoundaryHit Telemetry::PushOp(ipc::RecordType type, std::uint32_t token, std::uint16_t device,
                              const void* head, std::size_t head_bytes, const void* tail,
                              std::size_t tail_bytes, bool capture) {
  BoundaryHit hit;
  if (!lock_.TryLockBounded()) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return hit;
  }
  const std::uint16_t flags = static_cast<std::uint16_t>((detailed_ ? ipc::kFlagDetailed : 0) |
                                                         (capture ? ipc::kFlagCapture : 0));
  if (PushLocked(type, flags, head, head_bytes, tail, tail_bytes) && !capture) {
    if (detailed_ && device_live_ != nullptr) {
      ipc::MemInfoRecord info{};
      info.device = device;
      info.bytes_live = device_live_[device < 64 ? device : 0].load(std::memory_order_relaxed);
      PushLocked(ipc::RecordType::kMemInfo, ipc::kFlagDetailed, &info, sizeof(info), nullptr, 0);
    }
  }
  if (!capture) {
    // Count and match even a dropped op: the program did issue it.
    ++ops_in_iteration_;
    if (matcher_.Step(token)) {
      // The daemon's rule (IterationTracker): an occurrence less than half an iteration after
      // the last boundary is an inserted op, not a boundary. Both sides must cut alike, or the
      // detailed iteration the daemon asked for ends early.
      if (2 * ops_in_iteration_ < last_iteration_ops_) {
        ++ignored_matches_;
      } else {
        hit = StepIteration(token);
      }
    }
  }
  lock_.Unlock();
  return hit;
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
  }
  const std::uint32_t requested = detail_requested_.load(std::memory_order_relaxed);
  if (requested != 0 && requested > detail_done_.load(std::memory_order_relaxed)) {
    detailed_ = true;
    detailed_seq_ = requested;
  }
  return hit;
}

void Telemetry::PushEvent(ipc::RecordType type, const void* payload, std::size_t bytes) {
  lock_.Lock();
  PushLocked(type, detailed_ ? ipc::kFlagDetailed : 0, payload, bytes, nullptr, 0);
  lock_.Unlock();
}

TimedInterval Telemetry::BoundaryDeviceTime(std::uint64_t boundary, CUstream stream,
                                            bool capturing) {
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
    return {end - 1, static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6)};
  }
  return {};
}

void Telemetry::FinishBoundary(const BoundaryHit& hit, CUstream stream, bool stream_capturing) {
  ipc::IterationMarkRecord mark{};
  mark.iteration = hit.iteration;
  mark.host_time_ns = MonotonicNs();
  const TimedInterval timed = BoundaryDeviceTime(hit.iteration, stream, stream_capturing);
  mark.device_time_ns = timed.device_ns;
  mark.timed_iteration = timed.iteration;
  mark.ops = hit.ops;
  mark.generation = hit.generation;
  lock_.Lock();
  PushLocked(ipc::RecordType::kIterationMark, hit.flags, &mark, sizeof(mark), nullptr, 0);
  lock_.Unlock();
}

void Telemetry::Detach() {
  lock_.Lock();
  active_.store(false, std::memory_order_relaxed);
  ring_valid_ = false;
  header_ = nullptr;
  detailed_ = false;
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
  lock_.Unlock();
  active_.store(false, std::memory_order_relaxed);
  ring_valid_ = false;
  header_ = nullptr;
  detailed_ = false;
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
