// Producer and consumer ends of the event ring (layout in event_ring_layout.h).
// Neither end allocates, locks or makes a syscall. Each end is single-threaded: the shim
// serialises producers itself (see shim docs); the daemon drains one client per loop callback.
#pragma once

#include <cstddef>
#include <cstdint>
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
  /// On kFull the record is dropped whole; the caller counts the drop.
  PushResult Push(RecordType type, std::uint16_t flags, const void* payload, std::size_t bytes);
  PushResult Push2(RecordType type, std::uint16_t flags, const void* head, std::size_t head_bytes,
                   const void* tail, std::size_t tail_bytes);

  std::uint64_t capacity() const { return capacity_; }

 private:
  std::uint8_t* Claim(std::size_t record_bytes);
  EventRingDescriptor* descriptor_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t mask_ = 0;
};

/// A record as seen by the consumer; `payload` points into the ring and is valid until the
/// next Drain/Commit. The consumer must treat every byte as untrusted.
struct RecordView {
  RecordType type;
  std::uint16_t flags;
  std::span<const std::uint8_t> payload;
};

/// Why a drain stopped early (the ring content is corrupt or a writer died mid-record).
enum class DrainError : std::uint8_t { kNone, kBadLength, kStuckRecordRepaired };

/// Reads records. Not thread-safe: one consumer thread.
class EventRingConsumer {
 public:
  EventRingConsumer() = default;
  EventRingConsumer(EventRingDescriptor* descriptor, std::uint8_t* data, std::uint64_t capacity);

  /// Calls `handler(const RecordView&)` for up to `max_records` committed records, skipping
  /// padding, and stores head once at the end. Returns the number of records handed out.
  /// A negative (claimed) length stuck at the same position for longer than `stuck_timeout_ns`
  /// (measured with `now_ns`) is turned into padding: the writer died mid-record.
  template <typename Handler>
  std::size_t Drain(Handler&& handler, std::size_t max_records, std::uint64_t now_ns,
                    std::uint64_t stuck_timeout_ns);

  /// Error of the last Drain, and cumulative counts.
  DrainError last_error() const { return last_error_; }
  std::uint64_t repaired() const { return repaired_; }
  std::uint64_t corrupt() const { return corrupt_; }
  std::uint64_t capacity() const { return capacity_; }

 private:
  // Implementation helpers, defined in event_ring.cc. Peek returns the committed record at the
  // current read position or std::nullopt-like false.
  bool Next(RecordView* out, std::uint64_t now_ns, std::uint64_t stuck_timeout_ns);
  void Commit();

  EventRingDescriptor* descriptor_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t mask_ = 0;
  std::uint64_t position_ = 0;        // consumer's read position (bytes ever consumed)
  std::uint64_t stuck_position_ = ~0ull;
  std::uint64_t stuck_since_ns_ = 0;
  DrainError last_error_ = DrainError::kNone;
  std::uint64_t repaired_ = 0;
  std::uint64_t corrupt_ = 0;
};

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
