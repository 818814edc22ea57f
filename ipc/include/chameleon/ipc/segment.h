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
  kSystem,            ///< memfd/ftruncate/mmap failed (errno in the message)
  kBadGeometry,       ///< capacities not powers of two / too small / too large
  kNotSealed,         ///< fd is not a sealed memfd (F_SEAL_SHRINK missing)
  kTooSmall,          ///< fd smaller than a header
  kBadMagic,
  kNotReady,          ///< layout_version still 0
  kMajorMismatch,
  kBadHeaderBytes,
  kBadRegion,         ///< a region offset/size outside the segment, misaligned or overlapping
  kSizeMismatch,      ///< header segment_bytes differs from the fd's size
};
const char* ToString(SegmentError error);

/// A mapped segment. Move-only; unmaps (and closes its fd) on destruction.
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
  /// Daemon side: validates and maps a received descriptor (takes ownership of `fd`).
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
};

/// Bytes a segment of this geometry occupies.
std::uint64_t SegmentBytes(const SegmentGeometry& geometry);

}  // namespace chameleon::ipc
