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
    if (matcher_.Step(token)) hit = StepIteration(token);
  }
  lock_.Unlock();
  return hit;
}

BoundaryHit Telemetry::StepIteration(std::uint32_t /*token*/) {
  BoundaryHit hit;
  hit.hit = true;
  hit.iteration = ++iteration_;
  hit.ops = ops_in_iteration_;
  ops_in_iteration_ = 0;
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

std::uint64_t Telemetry::BoundaryDeviceTime(CUstream stream, bool capturing) {
  if (capturing || aux_ == nullptr || aux_->event_create == nullptr ||
      aux_->event_record == nullptr || aux_->event_query == nullptr ||
      aux_->event_elapsed_time == nullptr) {
    return 0;
  }
  std::unique_lock<std::mutex> lock(events_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;
  const int slot = static_cast<int>(boundaries_timed_ % kEventSlots);
  ++boundaries_timed_;
  if (events_[slot] == nullptr &&
      aux_->event_create(&events_[slot], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    events_[slot] = nullptr;
  }
  event_recorded_[slot] =
      events_[slot] != nullptr && aux_->event_record(events_[slot], stream) == CUDA_SUCCESS;
  // The interval that just ended is still in flight; report the latest one whose end event has
  // completed (queried without blocking), i.e. the previous iteration. docs/shim.md says so.
  const int prev = (slot + kEventSlots - 1) % kEventSlots;
  const int prev2 = (slot + kEventSlots - 2) % kEventSlots;
  if (!event_recorded_[prev] || !event_recorded_[prev2]) return 0;
  if (aux_->event_query(events_[prev]) != CUDA_SUCCESS) return 0;
  float ms = 0;
  if (aux_->event_elapsed_time(&ms, events_[prev2], events_[prev]) != CUDA_SUCCESS || ms < 0) {
    return 0;
  }
  return static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6);
}

void Telemetry::FinishBoundary(const BoundaryHit& hit, CUstream stream, bool stream_capturing) {
  ipc::IterationMarkRecord mark{};
  mark.iteration = hit.iteration;
  mark.host_time_ns = MonotonicNs();
  mark.device_time_ns = BoundaryDeviceTime(stream, stream_capturing);
  mark.ops = hit.ops;
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
  matcher_.SetSignature(tokens);
  ops_in_iteration_ = 0;
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
  new (&events_mu_) std::mutex();  // the parent may have held it at fork time
  for (int i = 0; i < kEventSlots; ++i) {
    events_[i] = nullptr;  // the child has no CUDA context; never touch the parent's events
    event_recorded_[i] = false;
  }
}

}  // namespace chameleon::shim
