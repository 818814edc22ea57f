// Layout of the daemon -> client policy mailbox: two slots and a generation seqlock.
//
//   mailbox_offset + 0                    PolicyMailboxDescriptor (one kFalseSharing slot)
//   mailbox_offset + 128                  slot 0: PolicySlotHeader (128) + blob[slot_bytes]
//   mailbox_offset + 256 + slot_bytes     slot 1: PolicySlotHeader (128) + blob[slot_bytes]
//
// Generation g (>= 1) is written to slot g % 2. The writer stores seq = 2g-1 (odd: writing),
// copies the blob with 8-byte atomic release stores, stores seq = 2g (release), then
// latest_generation = g (release). It never waits for the reader. A reader loads
// latest_generation (acquire), slot seq (acquire), copies the blob with 8-byte atomic acquire
// loads and re-loads seq: equal and == 2g means the copy is whole; otherwise it keeps its
// previous policy and retries later. (Acquire/release words rather than relaxed words + fences:
// GCC's ThreadSanitizer rejects atomic_thread_fence; on x86 both are plain moves.)
// slot_bytes is a multiple of kFalseSharing (so slot 1 stays aligned), fixed at segment creation
// (default kDefaultPolicySlotBytes) and recorded in SegmentHeader::mailbox_slot_bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "chameleon/ipc/constants.h"

namespace chameleon::ipc {

/// Default slot size: 8 MiB holds a policy of 100k swap entries at 64 bytes each plus headers.
inline constexpr std::size_t kDefaultPolicySlotBytes = 8u << 20;

struct alignas(kFalseSharing) PolicyMailboxDescriptor {
  std::atomic<std::uint64_t> latest_generation;  ///< 0 = nothing published yet
  std::atomic<std::uint64_t> refused_too_large;  ///< daemon counts blobs it could not publish
  std::uint8_t pad[kFalseSharing - 16];
};
static_assert(sizeof(PolicyMailboxDescriptor) == kFalseSharing);

struct alignas(kFalseSharing) PolicySlotHeader {
  std::atomic<std::uint64_t> seq;         ///< 2g-1 while writing generation g, 2g when complete
  std::atomic<std::uint64_t> blob_bytes;  ///< valid bytes in this slot (<= slot_bytes)
  std::uint8_t pad[kFalseSharing - 16];
};
static_assert(sizeof(PolicySlotHeader) == kFalseSharing);
static_assert(offsetof(PolicySlotHeader, blob_bytes) == 8);

}  // namespace chameleon::ipc
