// The producer side of the event ring: turns tracked calls into records, marks iterations and
// runs detailed iterations. One instance per process (inside Runtime).
//
// Records are written only while a daemon is attached (`active()`); before that, and after the
// daemon goes away, the shim only keeps its allocation table so that a daemon appearing later
// can be told which allocations are live (Tracker re-announces them on attach).
//
// One exception keeps op counts exact: when the first, synchronous connection reaches a daemon
// that has not answered yet, records go to a bounded process-local staging buffer (StartStaging)
// until the handshake ends; Attach then copies them into the ring in order, so the daemon sees
// every op from the first one. A full buffer or a failed handshake falls back to the announce.
//
// Thread-safety: every method may be called from any thread. The ring, the iteration matcher and
// the detailed-mode state are guarded by `lock_` (see spin_lock.h for why a bounded spin lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "biased_lock.h"
#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/event_ring.h"
#include "chameleon/ipc/segment_layout.h"
#include "iteration_matcher.h"
#include "op_timer.h"
#include "real_driver.h"
#include "swap/occurrence_counter.h"

namespace chameleon::shim {

/// What an op push learned about the iteration boundary (handled by the caller after the push,
/// outside the ring lock, because it records a CUDA event).
struct BoundaryHit {
  bool hit = false;
  std::uint64_t iteration = 0;
  std::uint64_t ops = 0;
  std::uint16_t flags = 0;       ///< flags the IterationMark carries
  std::uint64_t generation = 0;  ///< policy generation in force at the boundary
  /// The executor's cumulative measured waits at the boundary (ExecutorWaitNs), if measured.
  std::uint64_t executor_wait_ns = 0;
  bool executor_wait_measured = false;
  /// The boundary ended a detailed iteration: its op times go out before the mark.
  bool detail_ended = false;
};

/// A device-timed interval between two boundary events.
struct TimedInterval {
  std::uint64_t iteration = 0;  ///< interval j: from boundary j to boundary j + 1 (0 = none)
  std::uint64_t device_ns = 0;
  /// The executor's measured waits within the interval, when measured at both boundaries.
  std::optional<std::uint64_t> executor_wait_ns;
};

class Telemetry {
 public:
  Telemetry() = default;

  bool active() const { return active_.load(std::memory_order_relaxed); }

  /// Ops: dropped (counted) if the ring is full or the lock stays busy. `capture` marks ops issued
  /// while their stream captures a graph: flagged, and not counted towards iterations. True when
  /// the op completed an iteration boundary: `*hit` is then filled (and left alone otherwise).
  /// `*ticket`: the op's ring-order occurrence when an occurrence counter is set and the op was
  /// counted towards its iteration (invalid otherwise). `*detailed_op`: the op's ordinal among
  /// the detailed iteration's op records (OpTimer::kNotDetailed when it is not one).
  bool PushOp(ipc::RecordType type, std::uint32_t token, std::uint16_t device, const void* head,
              std::size_t head_bytes, const void* tail, std::size_t tail_bytes, bool capture,
              BoundaryHit* hit, swap::OccurrenceTicket* ticket, std::uint32_t* detailed_op);
  /// Events: never dropped for lock contention (only for a full ring).
  void PushEvent(ipc::RecordType type, const void* payload, std::size_t bytes);
  /// Called by the thread that got `hit`: records the boundary event on `stream`, then pushes the
  /// ended detailed iteration's op times (hit.detail_ended) and the IterationMark.
  void FinishBoundary(const BoundaryHit& hit, CUstream stream, bool stream_capturing);

  /// Attaches a ring (daemon connected) and runs `announce` under the ring lock before records
  /// flow, so the daemon sees the live allocations first. Caller holds the tracker mutex.
  /// With a staging buffer that did not overflow, its records replace `announce` (they start
  /// with the same announce, taken when staging started).
  template <typename Announce>
  void Attach(ipc::SegmentHeader* header, ipc::EventRingProducer producer, Announce&& announce) {
    // The copy can hold the lock for a millisecond or two: ops wait for it instead of dropping.
    attaching_.store(true, std::memory_order_relaxed);
    lock_.Lock();
    header_ = header;
    producer_ = producer;
    ring_valid_ = true;
    if (!ReplayStagingLocked()) announce();
    active_.store(true, std::memory_order_relaxed);
    StagingBuffer staged = TakeStagingLocked();  // freed outside the lock
    lock_.Unlock();
    attaching_.store(false, std::memory_order_relaxed);
  }
  /// Only inside Attach's or StartStaging's `announce`: pushes an AllocRecord while the ring
  /// lock is held.
  void PushAnnounceLocked(const ipc::AllocRecord* record) {
    PushLocked(ipc::RecordType::kAlloc, 0, record, sizeof(*record), nullptr, 0);
  }

  /// A daemon accepted the first connection but has not answered yet: records go to a staging
  /// buffer of at most `bytes` (allocated here) until Attach or StopStaging, starting with
  /// `announce` (the allocations live now). Caller holds the tracker mutex. Not while attached.
  template <typename Announce>
  void StartStaging(std::size_t bytes, Announce&& announce) {
    // Allocated outside the lock, and not zero-filled: this runs inside the program's first
    // allocation call, and only the bytes staged are ever written (2 MiB by default).
    StagingBuffer buffer{std::make_unique_for_overwrite<std::uint8_t[]>(bytes), bytes};
    lock_.Lock();
    if (!ring_valid_) {
      std::swap(staging_, buffer);
      staging_used_ = 0;
      staging_records_ = 0;
      staging_on_ = true;
      announce();
      active_.store(staging_on_, std::memory_order_relaxed);
    }
    lock_.Unlock();
  }
  /// The handshake failed: staged records are dropped (counted) and recording stops until a
  /// later Attach (which announces).
  void StopStaging();
  /// Records lost because the staging buffer filled up or the handshake failed (cumulative).
  std::uint64_t staging_lost() const { return staging_lost_.load(std::memory_order_relaxed); }
  /// Stops writing (daemon gone, fork child).
  void Detach();

  /// Client thread: a new boundary signature (from the policy) and control flags.
  void SetBoundary(const std::vector<std::uint32_t>& tokens);
  void SetDetailRequest(std::uint32_t seq) {
    detail_requested_.store(seq, std::memory_order_relaxed);
  }

  /// The policy runner's occurrence counter (set once the executor is on): counted under the ring
  /// lock, in ring order, where the iteration matcher steps (occurrence_counter.h).
  void SetOccurrenceCounter(swap::OccurrenceCounter* counter) {
    occurrences_.store(counter, std::memory_order_release);
  }

  /// Driver functions and per-device gauges it needs (set once at init).
  void Configure(const DriverAux* aux, const std::atomic<std::uint64_t>* device_live,
                 bool log_seqchange) {
    aux_ = aux;
    op_timer_.Configure(aux);
    device_live_ = device_live;
    log_seqchange_ = log_seqchange;
  }

  /// Times the ops of detailed iterations (the op paths call Start and Stop around each op).
  OpTimer& op_timer() { return op_timer_; }

  /// Producer counters (copied into the segment header by the client thread).
  std::uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t iterations() const { return iterations_.load(std::memory_order_relaxed); }
  std::uint64_t detail_done() const { return detail_done_.load(std::memory_order_relaxed); }

  /// Fork child: the parent's lock may have been held at fork time.
  void ResetForChild();

 private:
  // Inline: a call here would cost a launch as much as the ring's own work.
  [[gnu::always_inline]] bool PushLocked(ipc::RecordType type, std::uint16_t flags,
                                         const void* head, std::size_t hb, const void* tail,
                                         std::size_t tb) {
    if (__builtin_expect(!ring_valid_, 0)) {
      return staging_on_ && StageLocked(type, flags, head, hb, tail, tb);
    }
    const ipc::PushResult r = tail == nullptr || tb == 0
                                  ? producer_.Push(type, flags, head, hb)
                                  : producer_.Push2(type, flags, head, hb, tail, tb);
    if (__builtin_expect(r == ipc::PushResult::kOk, 1)) {
      written_.store(written_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return true;
    }
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  [[gnu::always_inline]] bool PushOpRecordLocked(ipc::RecordType type, std::uint16_t flags,
                                                 const void* head, std::size_t hb, const void* tail,
                                                 std::size_t tb);
  bool StageLocked(ipc::RecordType type, std::uint16_t flags, const void* head, std::size_t hb,
                   const void* tail, std::size_t tb);
  bool ReplayStagingLocked();
  /// Ends staging; the buffer is returned so that the caller frees it outside the lock.
  /// Records staged before the first attach (process-local, never shared).
  struct StagingBuffer {
    std::unique_ptr<std::uint8_t[]> data;
    std::size_t size = 0;
  };
  StagingBuffer TakeStagingLocked();
  BoundaryHit StepIteration(std::uint32_t token);
  TimedInterval BoundaryDeviceTime(const BoundaryHit& hit, CUstream stream, bool capturing);
  TimedInterval NewestCompletedLocked(std::uint64_t boundary);
  /// The detailed iteration that just ended: its ops' times as kOpTimes records.
  void PushOpTimes();

  std::atomic<bool> active_{false};
  std::atomic<bool> attaching_{false};  // Attach holds lock_ (ops wait rather than drop)
  std::atomic<swap::OccurrenceCounter*> occurrences_{nullptr};  // written under lock_ only
  BiasedLock lock_;
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
  // Staging before the first attach: records framed as StagedHeader + payload.
  StagingBuffer staging_;
  std::size_t staging_used_ = 0;
  std::uint64_t staging_records_ = 0;
  bool staging_on_ = false;  // records go to staging_ (false again once it overflowed)
  bool detailed_ = false;
  std::uint32_t detailed_seq_ = 0;
  std::uint32_t detailed_ops_ = 0;  // op records pushed in the detailed iteration so far
  // --- written under lock_, read anywhere ---
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> iterations_{0};
  std::atomic<std::uint64_t> detail_done_{0};
  std::atomic<std::uint32_t> detail_requested_{0};
  std::atomic<std::uint64_t> staging_lost_{0};
  // --- boundary events, guarded by events_mu_ (try-locked; a busy mutex skips timing) ---
  // Boundary b records its event in slot b % kEventSlots; event_boundary_ says which boundary a
  // slot holds (0 = none), so an interval is timed only between two consecutive boundaries.
  // Enough slots for the host to run several iterations ahead of the device.
  std::mutex events_mu_;
  static constexpr int kEventSlots = 8;
  CUevent events_[kEventSlots] = {};
  std::uint64_t event_boundary_[kEventSlots] = {};
  // The executor's cumulative waits at each slot's boundary (BoundaryHit), when measured.
  std::optional<std::uint64_t> wait_at_[kEventSlots];
  std::uint64_t last_timed_ = 0;  // newest interval reported (never report an older one)
  // --- configuration ---
  const DriverAux* aux_ = nullptr;
  const std::atomic<std::uint64_t>* device_live_ = nullptr;
  OpTimer op_timer_;
  bool log_seqchange_ = false;
};

}  // namespace chameleon::shim
