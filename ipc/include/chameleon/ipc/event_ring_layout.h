// Layout of the client -> daemon event ring (Aeron one-to-one style, single producer, single
// consumer, no locks). See docs/protocol.md for the protocol around it.
//
//   ring_offset + 0      EventRingDescriptor: tail | head_cache | head (a kFalseSharing slot each)
//   ring_offset + 384    data[capacity]  (capacity a power of two, >= 4 KiB)
//
// A record is RecordHeader + payload, padded to kRecordAlignment. The producer claims space by
// advancing `tail` (it is the only writer of tail), writes the header with a NEGATIVE length
// (claimed, not committed), the payload, then release-stores the positive length. The consumer
// acquire-loads the length and stops at <= 0; it advances `head` once per drained batch.
// A record never wraps: when it does not fit before the end, a padding record fills the gap.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "chameleon/ipc/constants.h"

namespace chameleon::ipc {

inline constexpr std::size_t kRecordAlignment = 8;
inline constexpr std::size_t kMinRingCapacity = 4096;
/// Largest record accepted (header included); keeps a launch with many tensors bounded.
inline constexpr std::size_t kMaxRecordBytes = 4096;

struct alignas(kFalseSharing) EventRingDescriptor {
  std::atomic<std::uint64_t> tail;  ///< producer: bytes ever claimed
  std::uint8_t pad0[kFalseSharing - 8];
  std::atomic<std::uint64_t> head_cache;  ///< producer: its last view of head
  std::uint8_t pad1[kFalseSharing - 8];
  std::atomic<std::uint64_t> head;  ///< consumer: bytes ever consumed
  std::uint8_t pad2[kFalseSharing - 8];
};
static_assert(std::is_standard_layout_v<EventRingDescriptor>);
static_assert(sizeof(EventRingDescriptor) == 3 * kFalseSharing);
static_assert(offsetof(EventRingDescriptor, tail) == 0);
static_assert(offsetof(EventRingDescriptor, head_cache) == kFalseSharing);
static_assert(offsetof(EventRingDescriptor, head) == 2 * kFalseSharing);

/// Every record starts with this 8-byte header.
struct RecordHeader {
  /// Total bytes incl. header, unpadded; < 0 claimed, > 0 committed, 0 nothing written yet.
  std::atomic<std::int32_t> length;
  std::uint16_t type;   ///< RecordType
  std::uint16_t flags;  ///< RecordFlag bits
};
static_assert(std::is_standard_layout_v<RecordHeader>);
static_assert(sizeof(RecordHeader) == 8);
static_assert(offsetof(RecordHeader, length) == 0);
static_assert(offsetof(RecordHeader, type) == 4);
static_assert(offsetof(RecordHeader, flags) == 6);
static_assert(std::atomic<std::int32_t>::is_always_lock_free);

constexpr std::size_t AlignRecord(std::size_t n) {
  return (n + kRecordAlignment - 1) & ~(kRecordAlignment - 1);
}

}  // namespace chameleon::ipc
