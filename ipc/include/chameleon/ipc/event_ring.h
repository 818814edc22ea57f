// Producer and consumer ends of the event ring (layout in event_ring_layout.h).
// Neither end allocates, locks or makes a syscall. Each end is single-threaded: the shim
// serialises producers itself (see shim docs); the daemon drains one client per loop callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/event_ring_layout.h"

namespace chameleon::ipc {

/// Result of a push. The producer never blocks: a full ring drops the whole record.
enum class PushResult : std::uint8_t { kOk, kFull, kTooLarge };

/// Writes records. Not thread-safe: exactly one thread pushes at a time.
class EventRingProducer {
 public:
  EventRingProducer() = default;
  /// `descriptor` is followed by `capacity` data bytes (power of two >= kMinRingCapacity).
  EventRingProducer(EventRingDescriptor* descriptor, std::uint8_t* data, std::uint64_t capacity);

  /// Copies a record of `type` with `payload` (Push2: `head` then `tail`) and commits it.
  /// On kFull the record is dropped whole; the caller counts the drop. Defined inline below so
  /// that, at a call site with constant sizes, the copies compile to a few plain stores.
  PushResult Push(RecordType type, std::uint16_t flags, const void* payload, std::size_t bytes);
  PushResult Push2(RecordType type, std::uint16_t flags, const void* head, std::size_t head_bytes,
                   const void* tail, std::size_t tail_bytes);

  std::uint64_t capacity() const { return capacity_; }

 private:
  // How far ahead of the tail Claim prefetches (CommitClaim says why). Harmless where it lands on
  // bytes the consumer still reads (a nearly full or tiny ring): a prefetch is only a hint.
  static constexpr std::uint64_t kPrefetchAhead = 512;
  // Fast path inline; ClaimSlow (event_ring.cc) handles "cache says full" and the ring end.
  std::uint8_t* Claim(std::size_t record_bytes);
  std::uint8_t* ClaimSlow(std::size_t record_bytes);
  bool HasSpace(std::uint64_t needed);
  std::uint8_t* CommitClaim(std::uint64_t index, std::size_t record_bytes, std::uint64_t advance);
  EventRingDescriptor* descriptor_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t mask_ = 0;
  std::uint64_t tail_ = 0;        // own copy of descriptor_->tail (only this end writes it)
  std::uint64_t head_cache_ = 0;  // own copy of descriptor_->head_cache
};

/// A record as seen by the consumer; `payload` points into the ring and is valid only inside the
/// Drain handler (Drain zeroes the consumed bytes before it returns). The consumer must treat
/// every byte as untrusted; Drain has already checked the length and the type's minimum payload.
struct RecordView {
  RecordType type;
  std::uint16_t flags;
  std::span<const std::uint8_t> payload;
};

/// Why a drain stopped early (the ring content is corrupt or a writer died mid-record).
/// kStuckRecordRepaired is informational (the drain went on past the repaired record); the
/// others stop the drain at the offending record, which stays in place: the daemon disconnects.
enum class DrainError : std::uint8_t {
  kNone,
  kBadLength,            ///< length < header, > kMaxRecordBytes, past the ring end or the batch
  kStuckRecordRepaired,  ///< a claimed record was stuck past the timeout and skipped as padding
  kBadType,              ///< ValidateRecord only: a type this reader does not know (Drain skips
                         ///< such records, see unknown_skipped())
  kBadPayload,           ///< payload shorter than its type needs (or tensor_count too large)
};
const char* ToString(DrainError error);

/// Checks a committed record's payload against its type: at least the fixed payload (a newer
/// minor may append), and for kLaunch the tensor list. Used by the consumer before handing out.
/// An unknown type (or padding) is kBadType here; Drain never hands such records out.
DrainError ValidateRecord(RecordType type, std::span<const std::uint8_t> payload);

/// Reads records. Not thread-safe: one consumer thread.
class EventRingConsumer {
 public:
  EventRingConsumer() = default;
  EventRingConsumer(EventRingDescriptor* descriptor, std::uint8_t* data, std::uint64_t capacity);

  /// Calls `handler(const RecordView&)` for up to `max_records` committed records, skipping
  /// padding, and stores head once at the end. Returns the number of records handed out.
  /// A negative (claimed) length stuck at the same position for longer than `stuck_timeout_ns`
  /// (measured with `now_ns`, e.g. MonotonicNowNs(); never decreasing) is turned into padding:
  /// the writer died mid-record. Choose a timeout far above any preemption (seconds). A corrupt
  /// record stops the drain and stays where it is (last_error() says why): disconnect the client.
  /// A committed record of a type this reader does not know (a newer minor's) but with a valid
  /// length is skipped and counted in unknown_skipped(); it is not an error.
  /// At most one ring's worth of bytes is consumed per call.
  template <typename Handler>
  std::size_t Drain(Handler&& handler, std::size_t max_records, std::uint64_t now_ns,
                    std::uint64_t stuck_timeout_ns);

  /// Error of the last Drain, and cumulative counts.
  DrainError last_error() const { return last_error_; }
  std::uint64_t repaired() const { return repaired_; }
  std::uint64_t corrupt() const { return corrupt_; }
  /// Well-framed records of unknown types skipped (cumulative).
  std::uint64_t unknown_skipped() const { return unknown_skipped_; }
  std::uint64_t capacity() const { return capacity_; }

 private:
  // Implementation helpers, defined in event_ring.cc. Next returns the next committed,
  // validated, non-padding record at the read position, or false (empty, stuck or corrupt).
  bool Next(RecordView* out, std::uint64_t now_ns, std::uint64_t stuck_timeout_ns);
  bool SkipIfStuck(std::int32_t length, std::uint64_t now_ns, std::uint64_t stuck_timeout_ns);
  bool Fail(DrainError error);
  void Commit();

  EventRingDescriptor* descriptor_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t mask_ = 0;
  std::uint64_t position_ = 0;   // consumer's read position (bytes ever consumed)
  std::uint64_t committed_ = 0;  // position at the last Commit (never trusts shared head)
  std::uint64_t stuck_position_ = ~0ull;
  std::uint64_t stuck_since_ns_ = 0;
  DrainError last_error_ = DrainError::kNone;
  std::uint64_t repaired_ = 0;
  std::uint64_t corrupt_ = 0;
  std::uint64_t unknown_skipped_ = 0;
};

// ---- Producer hot path (inline). Memory ordering is explained in event_ring.cc. ----

inline std::uint8_t* EventRingProducer::CommitClaim(std::uint64_t index, std::size_t record_bytes,
                                                    std::uint64_t advance) {
  // The line kPrefetchAhead bytes on, for writing: a record's first store to a line the core
  // does not own waits for it (from L3 or the consumer's core) and holds up every store behind
  // it; fetched ahead, it is there when the push reaches it. shim_bench: -5 ns a launch (16 MiB
  // ring; 256 B to 4 KiB ahead measured alike).
  __builtin_prefetch(data_ + ((index + kPrefetchAhead) & mask_), /*rw=*/1, /*locality=*/3);
  // Negative length before tail: a writer that dies after this leaves a skippable claim.
  reinterpret_cast<RecordHeader*>(data_ + index)
      ->length.store(-static_cast<std::int32_t>(record_bytes), std::memory_order_relaxed);
  tail_ += advance;
  descriptor_->tail.store(tail_, std::memory_order_release);
  return data_ + index;
}

inline std::uint8_t* EventRingProducer::Claim(std::size_t record_bytes) {
  const std::uint64_t aligned = AlignRecord(record_bytes);
  const std::uint64_t index = tail_ & mask_;
  const std::uint64_t used = tail_ - head_cache_;
  if (aligned <= capacity_ - index && used <= capacity_ && capacity_ - used >= aligned) {
    return CommitClaim(index, record_bytes, aligned);
  }
  return ClaimSlow(record_bytes);
}

inline PushResult EventRingProducer::Push2(RecordType type, std::uint16_t flags, const void* head,
                                           std::size_t head_bytes, const void* tail,
                                           std::size_t tail_bytes) {
  const std::size_t record_bytes = sizeof(RecordHeader) + head_bytes + tail_bytes;
  if (record_bytes > kMaxRecordBytes) return PushResult::kTooLarge;
  std::uint8_t* record = Claim(record_bytes);
  if (record == nullptr) return PushResult::kFull;
  auto* header = reinterpret_cast<RecordHeader*>(record);
  header->type = static_cast<std::uint16_t>(type);
  header->flags = flags;
  std::uint8_t* payload = record + sizeof(RecordHeader);
  if (head_bytes != 0) std::memcpy(payload, head, head_bytes);
  if (tail_bytes != 0) std::memcpy(payload + head_bytes, tail, tail_bytes);
  header->length.store(static_cast<std::int32_t>(record_bytes), std::memory_order_release);
  return PushResult::kOk;
}

inline PushResult EventRingProducer::Push(RecordType type, std::uint16_t flags, const void* payload,
                                          std::size_t bytes) {
  return Push2(type, flags, payload, bytes, nullptr, 0);
}

template <typename Handler>
std::size_t EventRingConsumer::Drain(Handler&& handler, std::size_t max_records,
                                     std::uint64_t now_ns, std::uint64_t stuck_timeout_ns) {
  last_error_ = DrainError::kNone;
  std::size_t n = 0;
  RecordView view{};
  while (n < max_records && Next(&view, now_ns, stuck_timeout_ns)) {
    handler(static_cast<const RecordView&>(view));
    ++n;
  }
  Commit();
  return n;
}

}  // namespace chameleon::ipc
