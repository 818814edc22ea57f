// Layout of one client's shared-memory segment. The client (shim) creates and sizes it; the daemon
// maps the descriptor it receives and validates every field before use.
//
//   offset 0           SegmentHeader (1024 bytes, 8 slots of kFalseSharing)
//   ring_offset        EventRing: descriptor (3 slots) + data (ring_capacity bytes, power of two)
//   names_offset       NameTable: descriptor (1 slot) + data (names_capacity bytes)
//   mailbox_offset     PolicyMailbox: descriptor (1 slot) + 2 slots of (kFalseSharing + slot_bytes)
//
// Every region starts on a kFalseSharing boundary. Only fixed-width fields; no pointers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "chameleon/ipc/constants.h"

namespace chameleon::ipc {

/// "CHMLSEG1" read as a little-endian u64.
inline constexpr std::uint64_t kSegmentMagic = 0x314745534c4d4843ull;

/// Bits of SegmentHeader::control_flags (daemon writes, shim reads).
enum ControlFlag : std::uint32_t {
  kControlDetailedIteration = 1u << 0,  ///< record the next whole iteration in detailed mode
  kControlDisabled = 1u << 1,           ///< chameleonctl disable: shim passes through, no swaps
};

namespace detail {
// Rows of executor_counters.inc per slot: each is one u64 of the slot.
inline constexpr std::size_t kSlot5Counters = 0
#define CHAMELEON_COUNTER_SLOT5(...) +1
#define CHAMELEON_COUNTER_SLOT7(...)
#define CHAMELEON_COUNTER_SHIM(...)
#include "chameleon/ipc/executor_counters.inc"
    ;
inline constexpr std::size_t kSlot7Counters = 0
#define CHAMELEON_COUNTER_SLOT5(...)
#define CHAMELEON_COUNTER_SLOT7(...) +1
#define CHAMELEON_COUNTER_SHIM(...)
#include "chameleon/ipc/executor_counters.inc"
    ;
// Both slots are full: a new published counter needs a new slot and a minor version bump.
static_assert(kSlot5Counters == 8 && kSlot7Counters == 8);
}  // namespace detail

/// Devices whose peak a client reports (slot 7's last 64 bytes); a node has at most 8 GPUs in
/// practice, and a device beyond them is simply never offered (nothing relies on its peak).
inline constexpr std::size_t kSegmentDevicePeaks = 8;
static_assert(8 * detail::kSlot7Counters + 8 * kSegmentDevicePeaks == kFalseSharing);

/// Fixed header at offset 0. Field comments say who writes each field.
struct alignas(kFalseSharing) SegmentHeader {
  // --- slot 0: identity and geometry; written once by the client before `layout_version`. ---
  std::uint64_t magic;                        ///< kSegmentMagic
  std::atomic<std::uint32_t> layout_version;  ///< PackVersion(major, minor); stored LAST (release)
  std::uint32_t header_bytes;                 ///< sizeof(SegmentHeader) as the writer knew it
  std::uint64_t segment_bytes;                ///< total mapped size
  std::uint64_t ring_offset;                  ///< EventRingDescriptor
  std::uint64_t ring_capacity;                ///< data bytes after the descriptor, power of two
  std::uint64_t names_offset;                 ///< NameTableDescriptor
  std::uint64_t names_capacity;               ///< data bytes after the descriptor
  std::uint64_t mailbox_offset;               ///< PolicyMailboxDescriptor
  std::uint64_t mailbox_slot_bytes;           ///< capacity of each of the two policy slots
  std::int32_t creator_pid;                   ///< informational; identity comes from SO_PEERCRED
  std::uint32_t reserved0;
  std::uint64_t start_time_ns;  ///< CLOCK_MONOTONIC at creation
  std::uint8_t pad0[kFalseSharing - 88];

  // --- slot 1: client liveness (client writes). ---
  std::atomic<std::uint64_t> client_heartbeat_ns;  ///< CLOCK_MONOTONIC, from a timer thread
  std::atomic<std::uint32_t> client_exited;        ///< 1 = clean exit sentinel
  std::uint8_t pad1[kFalseSharing - 12];

  // --- slot 2: daemon liveness (daemon writes). ---
  std::atomic<std::uint64_t> daemon_heartbeat_ns;
  std::atomic<std::uint32_t> daemon_exited;
  std::uint8_t pad2[kFalseSharing - 12];

  // --- slot 3: control (daemon writes, client reads). ---
  std::atomic<std::uint32_t> control_flags;       ///< ControlFlag bits
  std::atomic<std::uint32_t> detail_request_seq;  ///< bumped for each detailed-iteration request
  std::uint8_t pad3[kFalseSharing - 8];

  // --- slot 4: producer counters (client writes, daemon copies into metrics on a timer). ---
  std::atomic<std::uint64_t> records_written;
  std::atomic<std::uint64_t> records_dropped;  ///< whole records refused because the ring was full
  std::atomic<std::uint64_t> names_dropped;    ///< names that did not fit the name table
  std::atomic<std::uint64_t> detail_done_seq;  ///< last detail_request_seq fully recorded
  std::uint8_t pad4[kFalseSharing - 32];

  // --- slot 5: executor counters (client writes; filled by the swap executor). The fields are
  // the SLOT5 rows of executor_counters.inc, in its order (the help text of each is there). ---
#define CHAMELEON_COUNTER_SLOT5(field, stat, kind, segment, ...) std::atomic<std::uint64_t> segment;
#define CHAMELEON_COUNTER_SLOT7(...)
#define CHAMELEON_COUNTER_SHIM(...)
#include "chameleon/ipc/executor_counters.inc"
  std::uint8_t pad5[kFalseSharing - 8 * detail::kSlot5Counters];

  // --- slot 6: memory gauges (client writes). ---
  std::atomic<std::uint64_t> device_bytes_live;
  std::atomic<std::uint64_t> device_bytes_peak;
  std::atomic<std::uint64_t> device_limit_bytes;  ///< limit in force in the shim (0 = none)
  // Node placement (layout 1.3; zero from an older writer, which a daemon reads as "never lent,
  // never asks back").
  /// Owner side: bytes the shim needs back from what the daemon lent of its GPU to other clients,
  /// written at allocation pressure (the shim never waits for it: its safety net carries on).
  std::atomic<std::uint64_t> reclaim_request_bytes;
  /// Lessee side: bytes the executor holds on peer GPUs under leases, all helpers together.
  std::atomic<std::uint64_t> peer_held_bytes;
  /// Lessee side: generation of the last policy whose leases the executor fully complies with
  /// (everything beyond a dropped or shrunk lease is back in host memory).
  std::atomic<std::uint64_t> leases_applied_generation;
  /// Layout 1.4: the limit the shim has of its own — CHAMELEON_DEVICE_LIMIT, else the device's
  /// memory — whatever lower one the daemon's policy set (device_limit_bytes is the one in
  /// force). The daemon plans and lends from this one: planning from the limit in force would
  /// lower an owner's limit by its lease again at every republish. 0 from an older writer (the
  /// daemon then reads device_limit_bytes) and while the executor is not decided.
  std::atomic<std::uint64_t> own_limit_bytes;
  /// Layout 1.5: the device the swap executor serves, plus one (its ordinal in the client's
  /// numbering); 0 from an older writer and while the executor is not decided. The executor
  /// serves one device, so a process driving several (a pipeline) is planned for that one only
  /// (docs/policy.md, "Several devices in one process").
  std::atomic<std::uint64_t> executor_device;
  std::uint8_t pad6[kFalseSharing - 64];

  // --- slot 7 (layout 1.1): executor detail (client writes; zero from a 1.0 writer). The SLOT7
  // rows of executor_counters.inc, in its order. ---
#define CHAMELEON_COUNTER_SLOT5(...)
#define CHAMELEON_COUNTER_SLOT7(field, stat, kind, segment, ...) std::atomic<std::uint64_t> segment;
#define CHAMELEON_COUNTER_SHIM(...)
#include "chameleon/ipc/executor_counters.inc"
  /// Layout 1.6: the program's peak bytes on each of its first kSegmentDevicePeaks devices, by
  /// its own ordinal (tracked allocations; the executor's swap chunks are not the program's).
  /// The daemon lends a pipeline process's room on its other devices to that process's own
  /// swaps from these (docs/daemon.md, "A process's own devices"). Zero from an older writer.
  std::atomic<std::uint64_t> device_peak_bytes[kSegmentDevicePeaks];
  // A later minor appends a slot: slot 7 is full.
};

static_assert(std::is_standard_layout_v<SegmentHeader>);
static_assert(sizeof(SegmentHeader) == 8 * kFalseSharing);
static_assert(alignof(SegmentHeader) == kFalseSharing);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(offsetof(SegmentHeader, magic) == 0);
static_assert(offsetof(SegmentHeader, layout_version) == 8);
static_assert(offsetof(SegmentHeader, header_bytes) == 12);
static_assert(offsetof(SegmentHeader, segment_bytes) == 16);
static_assert(offsetof(SegmentHeader, ring_offset) == 24);
static_assert(offsetof(SegmentHeader, ring_capacity) == 32);
static_assert(offsetof(SegmentHeader, names_offset) == 40);
static_assert(offsetof(SegmentHeader, names_capacity) == 48);
static_assert(offsetof(SegmentHeader, mailbox_offset) == 56);
static_assert(offsetof(SegmentHeader, mailbox_slot_bytes) == 64);
static_assert(offsetof(SegmentHeader, creator_pid) == 72);
static_assert(offsetof(SegmentHeader, start_time_ns) == 80);
static_assert(offsetof(SegmentHeader, client_heartbeat_ns) == 1 * kFalseSharing);
static_assert(offsetof(SegmentHeader, client_exited) == 1 * kFalseSharing + 8);
static_assert(offsetof(SegmentHeader, daemon_heartbeat_ns) == 2 * kFalseSharing);
static_assert(offsetof(SegmentHeader, daemon_exited) == 2 * kFalseSharing + 8);
static_assert(offsetof(SegmentHeader, control_flags) == 3 * kFalseSharing);
static_assert(offsetof(SegmentHeader, detail_request_seq) == 3 * kFalseSharing + 4);
static_assert(offsetof(SegmentHeader, records_written) == 4 * kFalseSharing);
static_assert(offsetof(SegmentHeader, records_dropped) == 4 * kFalseSharing + 8);
static_assert(offsetof(SegmentHeader, names_dropped) == 4 * kFalseSharing + 16);
static_assert(offsetof(SegmentHeader, detail_done_seq) == 4 * kFalseSharing + 24);
static_assert(offsetof(SegmentHeader, swap_out_bytes) == 5 * kFalseSharing);
static_assert(offsetof(SegmentHeader, swap_in_bytes) == 5 * kFalseSharing + 8);
static_assert(offsetof(SegmentHeader, stall_count) == 5 * kFalseSharing + 16);
static_assert(offsetof(SegmentHeader, stall_ns) == 5 * kFalseSharing + 24);
static_assert(offsetof(SegmentHeader, prefetch_hits) == 5 * kFalseSharing + 32);
static_assert(offsetof(SegmentHeader, host_pool_bytes) == 5 * kFalseSharing + 40);
static_assert(offsetof(SegmentHeader, vmm_calls) == 5 * kFalseSharing + 48);
static_assert(offsetof(SegmentHeader, policy_generation_applied) == 5 * kFalseSharing + 56);
static_assert(offsetof(SegmentHeader, device_bytes_live) == 6 * kFalseSharing);
static_assert(offsetof(SegmentHeader, device_limit_bytes) == 6 * kFalseSharing + 16);
static_assert(offsetof(SegmentHeader, reclaim_request_bytes) == 6 * kFalseSharing + 24);
static_assert(offsetof(SegmentHeader, peer_held_bytes) == 6 * kFalseSharing + 32);
static_assert(offsetof(SegmentHeader, leases_applied_generation) == 6 * kFalseSharing + 40);
static_assert(offsetof(SegmentHeader, own_limit_bytes) == 6 * kFalseSharing + 48);
static_assert(offsetof(SegmentHeader, executor_device) == 6 * kFalseSharing + 56);
static_assert(offsetof(SegmentHeader, prefetch_misses) == 7 * kFalseSharing);
static_assert(offsetof(SegmentHeader, fault_ins) == 7 * kFalseSharing + 8);
static_assert(offsetof(SegmentHeader, evictions) == 7 * kFalseSharing + 16);
static_assert(offsetof(SegmentHeader, policy_ignored) == 7 * kFalseSharing + 24);
static_assert(offsetof(SegmentHeader, executor_iterations) == 7 * kFalseSharing + 32);
static_assert(offsetof(SegmentHeader, last_iteration_vmm_calls) == 7 * kFalseSharing + 40);
static_assert(offsetof(SegmentHeader, last_iteration_swap_out_bytes) == 7 * kFalseSharing + 48);
static_assert(offsetof(SegmentHeader, last_iteration_swap_in_bytes) == 7 * kFalseSharing + 56);
static_assert(offsetof(SegmentHeader, device_peak_bytes) == 7 * kFalseSharing + 64);

}  // namespace chameleon::ipc
