// Creating (client) and attaching (daemon) a segment. The client creates an anonymous memfd,
// sizes it, seals it against shrinking (so a hostile client cannot truncate it under the daemon and
// turn its reads into SIGBUS), writes the header and hands the fd to the daemon with SCM_RIGHTS.
// No name ever exists in /dev/shm; the memory goes away when both sides have unmapped it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chameleon/ipc/event_ring.h"
#include "chameleon/ipc/name_table.h"
#include "chameleon/ipc/policy_mailbox.h"
#include "chameleon/ipc/segment_layout.h"

namespace chameleon::ipc {

/// Region sizes chosen by the client. Defaults: 4 MiB ring (~100k launch records), 256 KiB of
/// names, two 8 MiB policy slots (tmpfs pages are committed only when touched).
struct SegmentGeometry {
  std::uint64_t ring_capacity = 4u << 20;
  std::uint64_t names_capacity = 256u << 10;
  std::uint64_t policy_slot_bytes = kDefaultPolicySlotBytes;
};

enum class SegmentError : std::uint8_t {
  kOk,
  kSystem,       ///< memfd/ftruncate/mmap failed (errno in the message)
  kBadGeometry,  ///< capacities not powers of two / too small / too large
  kNotSealed,    ///< fd is not a sealed memfd (F_SEAL_SHRINK missing)
  kTooSmall,     ///< fd smaller than a header
  kBadMagic,
  kNotReady,  ///< layout_version still 0
  kMajorMismatch,
  kBadHeaderBytes,
  kBadRegion,     ///< a region offset/size outside the segment, misaligned or overlapping
  kSizeMismatch,  ///< header segment_bytes differs from the fd's size
};
const char* ToString(SegmentError error);

/// Geometry limits checked by Create and Attach (a hostile header cannot make us map or index
/// absurd sizes).
inline constexpr std::uint64_t kMaxRingCapacity = 1ull << 30;
inline constexpr std::uint64_t kMaxNamesCapacity = 64ull << 20;
inline constexpr std::uint64_t kMinPolicySlotBytes = 4096;
inline constexpr std::uint64_t kMaxPolicySlotBytes = 256ull << 20;

/// CLOCK_MONOTONIC in nanoseconds (the clock of every *_ns field in the segment).
std::uint64_t MonotonicNowNs();

/// A mapped segment. Move-only; unmaps (and closes its fd) on destruction. The region geometry
/// is validated once (Create/Attach) and cached in the object: accessors never re-read offsets
/// from shared memory, which the peer could rewrite at any time. Not thread-safe.
class Segment {
 public:
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  /// Client side: creates, maps and initialises a segment; the version is stored last.
  static SegmentError Create(const SegmentGeometry& geometry, Segment* out);
  /// Daemon side: validates and maps a received descriptor (takes ownership of `fd`: it is
  /// closed on failure, kept in the Segment on success).
  static SegmentError Attach(int fd, Segment* out);

  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  int fd() const { return fd_; }
  /// Closes the descriptor (the client does so once the daemon has it; the mapping stays).
  void CloseFd();
  std::uint64_t bytes() const { return bytes_; }
  bool valid() const { return base_ != nullptr; }

  EventRingProducer ring_producer() const;
  EventRingConsumer ring_consumer() const;
  NameTableWriter name_writer() const;
  NameTableReader name_reader() const;
  PolicyMailboxWriter mailbox_writer() const;
  PolicyMailboxReader mailbox_reader() const;

 private:
  void Reset();
  std::uint8_t* base_ = nullptr;
  std::uint64_t bytes_ = 0;
  int fd_ = -1;
  // Validated copies of the header's geometry.
  std::uint64_t ring_offset_ = 0;
  std::uint64_t ring_capacity_ = 0;
  std::uint64_t names_offset_ = 0;
  std::uint64_t names_capacity_ = 0;
  std::uint64_t mailbox_offset_ = 0;
  std::uint64_t slot_bytes_ = 0;
};

/// Checks a geometry against the limits above (ring a power of two, names a multiple of 8,
/// policy slots a multiple of kFalseSharing).
SegmentError ValidateGeometry(const SegmentGeometry& geometry);

/// Bytes a segment of this geometry occupies.
std::uint64_t SegmentBytes(const SegmentGeometry& geometry);

}  // namespace chameleon::ipc
