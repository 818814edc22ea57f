// The producer side of the event ring: turns tracked calls into records, marks iterations and
// runs detailed iterations. One instance per process (inside Runtime).
//
// Records are written only while a daemon is attached (`active()`); before that, and after the
// daemon goes away, the shim only keeps its allocation table so that a daemon appearing later
// can be told which allocations are live (Tracker re-announces them on attach).
//
// Thread-safety: every method may be called from any thread. The ring, the iteration matcher and
// the detailed-mode state are guarded by `lock_` (see spin_lock.h for why a bounded spin lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/event_ring.h"
#include "chameleon/ipc/segment_layout.h"
#include "iteration_matcher.h"
#include "real_driver.h"
#include "spin_lock.h"

namespace chameleon::shim {

/// What an op push learned about the iteration boundary (handled by the caller after the push,
/// outside the ring lock, because it records a CUDA event).
struct BoundaryHit {
  bool hit = false;
  std::uint64_t iteration = 0;
  std::uint64_t ops = 0;
  std::uint16_t flags = 0;       ///< flags the IterationMark carries
  std::uint64_t generation = 0;  ///< policy generation in force at the boundary
};

/// A device-timed interval between two boundary events.
struct TimedInterval {
  std::uint64_t iteration = 0;  ///< interval j: from boundary j to boundary j + 1 (0 = none)
  std::uint64_t device_ns = 0;
};

class Telemetry {
 public:
  Telemetry() = default;

  bool active() const { return active_.load(std::memory_order_relaxed); }

  /// Ops: dropped (counted) if the ring is full or the lock stays busy. `capture` marks ops issued
  /// while their stream captures a graph: flagged, and not counted towards iterations.
  BoundaryHit PushOp(ipc::RecordType type, std::uint32_t token, std::uint16_t device,
                     const void* head, std::size_t head_bytes, const void* tail,
                     std::size_t tail_bytes, bool capture);
  /// Events: never dropped for lock contention (only for a full ring).
  void PushEvent(ipc::RecordType type, const void* payload, std::size_t bytes);
  /// Called by the thread that got `hit`: records the boundary event on `stream`, then pushes the
  /// IterationMark.
  void FinishBoundary(const BoundaryHit& hit, CUstream stream, bool stream_capturing);

  /// Attaches a ring (daemon connected) and runs `announce` under the ring lock before records
  /// flow, so the daemon sees the live allocations first. Caller holds the tracker mutex.
  template <typename Announce>
  void Attach(ipc::SegmentHeader* header, ipc::EventRingProducer producer, Announce&& announce) {
    lock_.Lock();
    header_ = header;
    producer_ = producer;
    ring_valid_ = true;
    announce();
    active_.store(true, std::memory_order_relaxed);
    lock_.Unlock();
  }
  /// Only inside Attach's `announce`: pushes an AllocRecord while the ring lock is held.
  void PushAnnounceLocked(const ipc::AllocRecord* record) {
    PushLocked(ipc::RecordType::kAlloc, 0, record, sizeof(*record), nullptr, 0);
  }
  /// Stops writing (daemon gone, fork child).
  void Detach();

  /// Client thread: a new boundary signature (from the policy) and control flags.
  void SetBoundary(const std::vector<std::uint32_t>& tokens);
  void SetDetailRequest(std::uint32_t seq) {
    detail_requested_.store(seq, std::memory_order_relaxed);
  }

  /// Driver functions and per-device gauges it needs (set once at init).
  void Configure(const DriverAux* aux, const std::atomic<std::uint64_t>* device_live,
                 bool log_seqchange) {
    aux_ = aux;
    device_live_ = device_live;
    log_seqchange_ = log_seqchange;
  }

  /// Producer counters (copied into the segment header by the client thread).
  std::uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t iterations() const { return iterations_.load(std::memory_order_relaxed); }
  std::uint64_t detail_done() const { return detail_done_.load(std::memory_order_relaxed); }

  /// Fork child: the parent's lock may have been held at fork time.
  void ResetForChild();

 private:
  bool PushLocked(ipc::RecordType type, std::uint16_t flags, const void* head, std::size_t hb,
                  const void* tail, std::size_t tb);
  BoundaryHit StepIteration(std::uint32_t token);
  TimedInterval BoundaryDeviceTime(std::uint64_t boundary, CUstream stream, bool capturing);
  TimedInterval NewestCompletedLocked(std::uint64_t boundary);

  std::atomic<bool> active_{false};
  SpinLock lock_;
  // --- guarded by lock_ ---
  ipc::SegmentHeader* header_ = nullptr;
  ipc::EventRingProducer producer_;
  bool ring_valid_ = false;
  IterationMatcher matcher_;
  std::uint64_t ops_in_iteration_ = 0;
  std::uint64_t last_iteration_ops_ = 0;  // ops of the last accepted iteration (0: none yet)
  std::uint64_t ignored_matches_ = 0;     // signature occurrences too early to be a boundary
  bool boundary_seen_ = false;            // since the signature was set
  std::vector<std::uint32_t> signature_;  // the one the matcher holds (to ignore re-sends)
  std::uint64_t iteration_ = 0;
  bool detailed_ = false;
  std::uint32_t detailed_seq_ = 0;
  // --- written under lock_, read anywhere ---
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> iterations_{0};
  std::atomic<std::uint64_t> detail_done_{0};
  std::atomic<std::uint32_t> detail_requested_{0};
  // --- boundary events, guarded by events_mu_ (try-locked; a busy mutex skips timing) ---
  // Boundary b records its event in slot b % kEventSlots; event_boundary_ says which boundary a
  // slot holds (0 = none), so an interval is timed only between two consecutive boundaries.
  // Enough slots for the host to run several iterations ahead of the device.
  std::mutex events_mu_;
  static constexpr int kEventSlots = 8;
  CUevent events_[kEventSlots] = {};
  std::uint64_t event_boundary_[kEventSlots] = {};
  std::uint64_t last_timed_ = 0;  // newest interval reported (never report an older one)
  // --- configuration ---
  const DriverAux* aux_ = nullptr;
  const std::atomic<std::uint64_t>* device_live_ = nullptr;
  bool log_seqchange_ = false;
};

}  // namespace chameleon::shim
