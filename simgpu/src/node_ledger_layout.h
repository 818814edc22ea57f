// Layout of the node-wide capacity ledger (SIMGPU_NODE, docs/simgpu.md "A node of several
// processes"): one file under /dev/shm that every process of one simulated node maps, so that
// device memory one process takes is memory every other process can no longer get.
//
//   0        LedgerHeader   (256 B: identity, sizes, offsets, the node devices' capacities)
//   256      LedgerDevice[kLedgerMaxDevices]   (one kFalseSharing line each: bytes in use)
//   2304     LedgerSlot[kLedgerSlots]          (one per attached process: owner and its bytes)
//
// The creator writes everything, then release-stores `version`; readers treat 0 as "not ready"
// and reject any other value but kLedgerVersion. The file is written by other processes, so a
// reader validates every header field before use and never trusts a count or an offset from it.
// Only fixed-width fields and lock-free atomics; no pointers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace chameleon::simgpu {

/// Not std::hardware_destructive_interference_size: processes built with other -mtune flags must
/// agree on the layout.
inline constexpr std::size_t kLedgerLine = 128;
inline constexpr std::uint64_t kLedgerMagic = 0x52454744454c4753ull;  // "SGLEDGER" little-endian
inline constexpr std::uint32_t kLedgerVersion = 1;
/// Node devices a ledger describes: simgpu's kMaxDevices.
inline constexpr std::uint32_t kLedgerMaxDevices = 16;
/// Processes attached at once. A node runs a handful of training processes plus tools; 64 leaves
/// room for test suites that fork, and stale slots are reclaimed when they run out.
inline constexpr std::uint32_t kLedgerSlots = 64;
inline constexpr std::size_t kLedgerMachineBytes = 48;

/// Slot owner word: (state << 32) | pid. 0 = free.
enum class SlotState : std::uint32_t {
  kFree = 0,
  kClaiming = 1,    ///< pid is writing its start time; it has charged nothing yet
  kLive = 2,        ///< pid (started at start_time) charges through this slot
  kReclaiming = 3,  ///< pid (the reclaimer, not the owner) is returning a dead owner's bytes
};

struct LedgerHeader {
  std::uint64_t magic;                 ///< kLedgerMagic
  std::atomic<std::uint32_t> version;  ///< 0 until the creator is done; stored last (release)
  std::uint32_t header_bytes;          ///< sizeof(LedgerHeader)
  std::uint64_t file_bytes;            ///< sizeof(LedgerFile): the file's exact size
  std::uint32_t device_count;          ///< node devices (SIMGPU_DEVICES of the creator)
  std::uint32_t slot_count;            ///< kLedgerSlots
  std::uint64_t devices_offset;        ///< offsetof(LedgerFile, devices)
  std::uint64_t slots_offset;          ///< offsetof(LedgerFile, slots)
  std::uint64_t creator_pid;           ///< informational (a reader's error message)
  std::uint64_t reserved0;             ///< 0; room for a later field without a new layout
  char machine[kLedgerMachineBytes];   ///< SIMGPU_MACHINE's name, NUL-padded
  std::uint8_t reserved1[16];          ///< 0
  std::uint64_t capacity[kLedgerMaxDevices];  ///< bytes of each node device (0 past device_count)
};
static_assert(std::is_standard_layout_v<LedgerHeader>);
static_assert(sizeof(LedgerHeader) == 256);
static_assert(offsetof(LedgerHeader, magic) == 0);
static_assert(offsetof(LedgerHeader, version) == 8);
static_assert(offsetof(LedgerHeader, header_bytes) == 12);
static_assert(offsetof(LedgerHeader, file_bytes) == 16);
static_assert(offsetof(LedgerHeader, device_count) == 24);
static_assert(offsetof(LedgerHeader, slot_count) == 28);
static_assert(offsetof(LedgerHeader, devices_offset) == 32);
static_assert(offsetof(LedgerHeader, slots_offset) == 40);
static_assert(offsetof(LedgerHeader, creator_pid) == 48);
static_assert(offsetof(LedgerHeader, reserved0) == 56);
static_assert(offsetof(LedgerHeader, machine) == 64);
static_assert(offsetof(LedgerHeader, reserved1) == 112);
static_assert(offsetof(LedgerHeader, capacity) == 128);

/// Bytes in use on one node device, by every attached process. Written by all of them (CAS).
struct alignas(kLedgerLine) LedgerDevice {
  std::atomic<std::uint64_t> used;
  std::uint8_t pad[kLedgerLine - 8];
};
static_assert(std::is_standard_layout_v<LedgerDevice>);
static_assert(sizeof(LedgerDevice) == kLedgerLine);
static_assert(offsetof(LedgerDevice, used) == 0);

/// One attached process. Its bytes are written by the owner (and by a reclaimer once the owner
/// is dead), on a line apart from the owner word that other processes read when they scan.
struct alignas(kLedgerLine) LedgerSlot {
  std::atomic<std::uint64_t> owner;       ///< (SlotState << 32) | pid
  std::atomic<std::uint64_t> start_time;  ///< the owner's /proc/<pid>/stat starttime (ticks)
  std::uint8_t pad[kLedgerLine - 16];
  std::atomic<std::uint64_t> bytes[kLedgerMaxDevices];  ///< what the owner holds per device
};
static_assert(std::is_standard_layout_v<LedgerSlot>);
static_assert(sizeof(LedgerSlot) == 2 * kLedgerLine);
static_assert(offsetof(LedgerSlot, owner) == 0);
static_assert(offsetof(LedgerSlot, start_time) == 8);
static_assert(offsetof(LedgerSlot, bytes) == kLedgerLine);

struct LedgerFile {
  LedgerHeader header;
  LedgerDevice devices[kLedgerMaxDevices];
  LedgerSlot slots[kLedgerSlots];
};
static_assert(std::is_standard_layout_v<LedgerFile>);
static_assert(offsetof(LedgerFile, header) == 0);
static_assert(offsetof(LedgerFile, devices) == 256);
static_assert(offsetof(LedgerFile, slots) == 256 + kLedgerMaxDevices * kLedgerLine);
static_assert(sizeof(LedgerFile) == 256 + kLedgerMaxDevices * kLedgerLine + kLedgerSlots * 256);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

constexpr std::uint64_t SlotOwner(SlotState s, std::uint32_t pid) {
  return (static_cast<std::uint64_t>(s) << 32) | pid;
}
constexpr SlotState OwnerState(std::uint64_t owner) { return static_cast<SlotState>(owner >> 32); }
constexpr std::uint32_t OwnerPid(std::uint64_t owner) {
  return static_cast<std::uint32_t>(owner & 0xffffffffu);
}

}  // namespace chameleon::simgpu
