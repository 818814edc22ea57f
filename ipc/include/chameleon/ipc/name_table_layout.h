// Layout of the append-only token -> name table (client writes, daemon reads).
//
//   names_offset + 0     NameTableDescriptor (one kFalseSharing slot)
//   names_offset + 128   data[names_capacity]: entries back to back, each 8-byte aligned
//
// An entry is NameEntryHeader + name bytes (not NUL-terminated). The writer fills the entry, then
// release-stores `committed_bytes` past it, so a reader that acquire-loads committed_bytes never
// sees half a name. When the table is full further names are dropped and counted in
// SegmentHeader::names_dropped; the daemon then shows "token <n>".
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "chameleon/ipc/constants.h"

namespace chameleon::ipc {

inline constexpr std::size_t kMaxNameBytes = 1024;  ///< longer (mangled) names are truncated

struct alignas(kFalseSharing) NameTableDescriptor {
  std::atomic<std::uint64_t> committed_bytes;  ///< bytes of data[] holding complete entries
  std::atomic<std::uint32_t> entry_count;      ///< informational
  std::uint8_t pad[kFalseSharing - 12];
};
static_assert(sizeof(NameTableDescriptor) == kFalseSharing);
static_assert(offsetof(NameTableDescriptor, committed_bytes) == 0);
static_assert(offsetof(NameTableDescriptor, entry_count) == 8);

struct NameEntryHeader {
  std::uint32_t token;
  std::uint16_t name_bytes;  ///< <= kMaxNameBytes
  std::uint16_t reserved;
};
static_assert(sizeof(NameEntryHeader) == 8);
static_assert(std::is_standard_layout_v<NameEntryHeader>);

}  // namespace chameleon::ipc
