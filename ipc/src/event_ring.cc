// Event ring producer and consumer. See event_ring_layout.h and docs/protocol.md.
//
// Memory ordering, in one place:
//  - Producer: writes type/flags, stores the NEGATIVE length (relaxed), release-stores tail,
//    copies the payload, release-stores the positive length. The negative length is stored before
//    tail so that a writer that dies after claiming always leaves a length the consumer can skip.
//  - Consumer: acquire-loads the length; > 0 means the payload is visible. After a batch it zeroes
//    the consumed bytes (so the next lap starts from "length 0 = nothing yet") and release-stores
//    head; the producer acquire-loads head before reusing the space, so the zeroes are visible.
#include "chameleon/ipc/event_ring.h"

#include <algorithm>
#include <cstring>

namespace chameleon::ipc {
namespace {

RecordHeader* HeaderAt(std::uint8_t* data, std::uint64_t index) {
  return reinterpret_cast<RecordHeader*>(data + index);
}

// Minimum payload of each known record type; a newer minor may append fields, so longer is fine.
constexpr std::size_t kMinPayload[] = {
    0,                             // kPadding (never handed out)
    sizeof(LaunchRecord),          // kLaunch (+ tensors, checked separately)
    sizeof(CopyRecord),            // kCopy
    sizeof(MemsetRecord),          // kMemset
    sizeof(AllocRecord),           // kAlloc
    sizeof(FreeRecord),            // kFree
    sizeof(SyncRecord),            // kSync
    kIterationMarkV10Bytes,        // kIterationMark (1.0 fields; 1.1 appended two)
    sizeof(MemInfoRecord),         // kMemInfo
    sizeof(PointerTargetsRecord),  // kPointerTargets (+ ids, checked separately; layout 1.2)
    sizeof(OpTimesRecord),         // kOpTimes (+ entries, checked separately; layout 1.8)
};
constexpr std::size_t kKnownTypes = sizeof(kMinPayload) / sizeof(kMinPayload[0]);

bool IsKnownType(RecordType type) {
  const auto index = static_cast<std::size_t>(type);
  return index >= 1 && index < kKnownTypes;
}

// Inlined into the consumer's loop (a quarter of its time when it was a call).
[[gnu::always_inline]] inline DrainError ValidatePayload(RecordType type, const std::uint8_t* data,
                                                         std::size_t bytes) {
  const auto index = static_cast<std::size_t>(type);
  if (index - 1 >= kKnownTypes - 1) return DrainError::kBadType;  // also rejects kPadding (0)
  if (bytes < kMinPayload[index]) return DrainError::kBadPayload;
  if (type == RecordType::kLaunch) {
    std::uint16_t tensors;
    std::memcpy(&tensors, data + offsetof(LaunchRecord, tensor_count), sizeof(tensors));
    if (tensors > kMaxLaunchTensors ||
        bytes < sizeof(LaunchRecord) + std::size_t{tensors} * sizeof(std::uint64_t)) {
      return DrainError::kBadPayload;
    }
  } else if (type == RecordType::kPointerTargets) {
    std::uint32_t count;
    std::memcpy(&count, data + offsetof(PointerTargetsRecord, count), sizeof(count));
    if (count > kMaxPointerTargetsPerRecord ||
        bytes < sizeof(PointerTargetsRecord) + std::size_t{count} * sizeof(std::uint64_t)) {
      return DrainError::kBadPayload;
    }
  } else if (type == RecordType::kOpTimes) {
    std::uint32_t count;
    std::memcpy(&count, data + offsetof(OpTimesRecord, count), sizeof(count));
    if (count > kMaxOpTimesPerRecord ||
        bytes < sizeof(OpTimesRecord) + std::size_t{count} * sizeof(OpTime)) {
      return DrainError::kBadPayload;
    }
  }
  return DrainError::kNone;
}

}  // namespace

const char* ToString(DrainError error) {
  switch (error) {
    case DrainError::kNone:
      return "ok";
    case DrainError::kBadLength:
      return "record length out of bounds";
    case DrainError::kStuckRecordRepaired:
      return "stuck record (dead writer) skipped as padding";
    case DrainError::kBadType:
      return "unknown record type";
    case DrainError::kBadPayload:
      return "record payload too short for its type";
  }
  return "unknown drain error";
}

DrainError ValidateRecord(RecordType type, std::span<const std::uint8_t> payload) {
  return ValidatePayload(type, payload.data(), payload.size());
}

// ---------------------------------------------------------------------------------------------
// Producer

EventRingProducer::EventRingProducer(EventRingDescriptor* descriptor, std::uint8_t* data,
                                     std::uint64_t capacity)
    : descriptor_(descriptor), data_(data), capacity_(capacity), mask_(capacity - 1) {
  // Resume where a previous producer object on this segment stopped. Aligned down so a scribbled
  // value can never make us write a misaligned header.
  tail_ = descriptor_->tail.load(std::memory_order_relaxed) & ~std::uint64_t{kRecordAlignment - 1};
  head_cache_ = descriptor_->head_cache.load(std::memory_order_relaxed);
}

// True when `needed` bytes are free after tail_. The shared head is read only when the cached
// copy says "full", so the common case touches no cache line the consumer writes.
bool EventRingProducer::HasSpace(std::uint64_t needed) {
  auto fits = [&](std::uint64_t head) {
    const std::uint64_t used = tail_ - head;  // a head ahead of tail wraps to huge: "full"
    return used <= capacity_ && capacity_ - used >= needed;
  };
  if (fits(head_cache_)) return true;
  head_cache_ = descriptor_->head.load(std::memory_order_acquire);
  descriptor_->head_cache.store(head_cache_, std::memory_order_relaxed);
  return fits(head_cache_);
}

// The claim the inline fast path could not make: the cached head says "full" (re-read the
// shared head) or the record would cross the ring end (pad to the end first: records never wrap).
std::uint8_t* EventRingProducer::ClaimSlow(std::size_t record_bytes) {
  const std::uint64_t aligned = AlignRecord(record_bytes);
  std::uint64_t index = tail_ & mask_;
  const std::uint64_t to_end = capacity_ - index;
  const std::uint64_t padding = aligned > to_end ? to_end : 0;
  if (!HasSpace(aligned + padding)) return nullptr;
  if (padding != 0) {
    auto* pad = reinterpret_cast<RecordHeader*>(data_ + index);
    pad->type = static_cast<std::uint16_t>(RecordType::kPadding);
    pad->flags = 0;
    pad->length.store(static_cast<std::int32_t>(padding), std::memory_order_release);
    index = 0;
  }
  return CommitClaim(index, record_bytes, aligned + padding);
}

// ---------------------------------------------------------------------------------------------
// Consumer

EventRingConsumer::EventRingConsumer(EventRingDescriptor* descriptor, std::uint8_t* data,
                                     std::uint64_t capacity)
    : descriptor_(descriptor), data_(data), capacity_(capacity), mask_(capacity - 1) {
  // A daemon that re-attaches a segment resumes at the stored head (aligned down: the client
  // owns this memory and may have scribbled on it).
  position_ =
      descriptor_->head.load(std::memory_order_acquire) & ~std::uint64_t{kRecordAlignment - 1};
  committed_ = position_;
}

bool EventRingConsumer::Fail(DrainError error) {
  last_error_ = error;
  ++corrupt_;
  return false;
}

// A claimed (negative) length at the read position: either the writer is between claim and
// commit, or it died there. Only the same position stuck for longer than the timeout is skipped.
bool EventRingConsumer::SkipIfStuck(std::int32_t length, std::uint64_t now_ns,
                                    std::uint64_t stuck_timeout_ns) {
  if (stuck_position_ != position_) {
    stuck_position_ = position_;
    stuck_since_ns_ = now_ns;
    return false;
  }
  if (now_ns < stuck_since_ns_ || now_ns - stuck_since_ns_ < stuck_timeout_ns) return false;
  const std::uint64_t claimed = static_cast<std::uint64_t>(-static_cast<std::int64_t>(length));
  const std::uint64_t aligned = AlignRecord(claimed);
  if (claimed < sizeof(RecordHeader) || claimed > kMaxRecordBytes ||
      aligned > capacity_ - (position_ & mask_) || position_ + aligned - committed_ > capacity_) {
    return Fail(DrainError::kBadLength);
  }
  // Skipped like padding; Commit zeroes it with the rest of the batch.
  position_ += aligned;
  ++repaired_;
  last_error_ = DrainError::kStuckRecordRepaired;
  return true;
}

bool EventRingConsumer::Next(RecordView* out, std::uint64_t now_ns,
                             std::uint64_t stuck_timeout_ns) {
  for (;;) {
    // A whole ring's worth read in this batch: stop so Commit frees it (also bounds the loop
    // against a ring filled with nothing but padding).
    if (position_ - committed_ >= capacity_) return false;
    const std::uint64_t index = position_ & mask_;
    RecordHeader* header = HeaderAt(data_, index);
    const std::int32_t length = header->length.load(std::memory_order_acquire);
    if (length == 0) return false;
    if (length < 0) {
      if (SkipIfStuck(length, now_ns, stuck_timeout_ns)) continue;
      return false;
    }
    const std::uint64_t aligned = AlignRecord(static_cast<std::uint64_t>(length));
    const auto type = static_cast<RecordType>(header->type);
    const std::uint64_t max_length = type == RecordType::kPadding ? capacity_ : kMaxRecordBytes;
    if (static_cast<std::uint64_t>(length) < sizeof(RecordHeader) ||
        static_cast<std::uint64_t>(length) > max_length || aligned > capacity_ - index ||
        position_ + aligned - committed_ > capacity_) {
      return Fail(DrainError::kBadLength);
    }
    if (type == RecordType::kPadding) {
      position_ += aligned;
      continue;
    }
    if (!IsKnownType(type)) {
      // A newer minor's record type: the framing (its length) is valid, so skip it whole. Only
      // the length is trusted to find the next record; bad lengths were rejected above.
      position_ += aligned;
      ++unknown_skipped_;
      continue;
    }
    const std::uint8_t* payload = data_ + index + sizeof(RecordHeader);
    const std::size_t payload_bytes = static_cast<std::size_t>(length) - sizeof(RecordHeader);
    const DrainError error = ValidatePayload(type, payload, payload_bytes);
    if (error != DrainError::kNone) return Fail(error);
    *out = RecordView{type, header->flags, {payload, payload_bytes}};
    position_ += aligned;
    return true;
  }
}

void EventRingConsumer::Commit() {
  if (position_ == committed_) return;
  const std::uint64_t bytes = position_ - committed_;
  const std::uint64_t start = committed_ & mask_;
  const std::uint64_t first = std::min(bytes, capacity_ - start);
  std::memset(data_ + start, 0, first);
  std::memset(data_, 0, bytes - first);
  descriptor_->head.store(position_, std::memory_order_release);
  committed_ = position_;
}

}  // namespace chameleon::ipc
