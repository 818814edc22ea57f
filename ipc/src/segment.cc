// Segment creation (client) and validation + mapping (daemon). See segment.h.
#include "chameleon/ipc/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <utility>

namespace chameleon::ipc {
namespace {

// Whole segments above this are refused by Attach before mapping (the largest valid geometry is
// about 1.6 GiB).
constexpr std::uint64_t kMaxSegmentBytes = 4ull << 30;

constexpr std::uint64_t RoundUpSlot(std::uint64_t n) {
  return (n + kFalseSharing - 1) & ~std::uint64_t{kFalseSharing - 1};
}
constexpr bool IsPowerOfTwo(std::uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

std::uint64_t RingRegionBytes(std::uint64_t capacity) {
  return sizeof(EventRingDescriptor) + capacity;
}
std::uint64_t NamesRegionBytes(std::uint64_t capacity) {
  return sizeof(NameTableDescriptor) + capacity;
}
std::uint64_t MailboxRegionBytes(std::uint64_t slot_bytes) {
  return sizeof(PolicyMailboxDescriptor) + 2 * (sizeof(PolicySlotHeader) + slot_bytes);
}

// Offsets of the three regions for a geometry, in the order the header lists them.
struct Offsets {
  std::uint64_t ring, names, mailbox, total;
};
Offsets ComputeOffsets(const SegmentGeometry& g) {
  Offsets o{};
  o.ring = sizeof(SegmentHeader);
  o.names = RoundUpSlot(o.ring + RingRegionBytes(g.ring_capacity));
  o.mailbox = RoundUpSlot(o.names + NamesRegionBytes(g.names_capacity));
  o.total = o.mailbox + MailboxRegionBytes(g.policy_slot_bytes);
  return o;
}

// [offset, offset + bytes) lies on a slot boundary, after the header and inside the segment.
bool RegionInside(std::uint64_t offset, std::uint64_t bytes, std::uint64_t header_bytes,
                  std::uint64_t segment_bytes) {
  return offset % kFalseSharing == 0 && offset >= header_bytes && offset <= segment_bytes &&
         bytes <= segment_bytes - offset;
}
bool Disjoint(std::uint64_t a, std::uint64_t a_bytes, std::uint64_t b, std::uint64_t b_bytes) {
  return a + a_bytes <= b || b + b_bytes <= a;
}

// Validates everything after the identity fields. Capacities are bounded first, so the region
// arithmetic below cannot overflow.
SegmentError ValidateRegions(const SegmentHeader& h, std::uint64_t size) {
  const SegmentGeometry g{h.ring_capacity, h.names_capacity, h.mailbox_slot_bytes};
  if (ValidateGeometry(g) != SegmentError::kOk) return SegmentError::kBadGeometry;
  const std::uint64_t ring = RingRegionBytes(g.ring_capacity);
  const std::uint64_t names = NamesRegionBytes(g.names_capacity);
  const std::uint64_t mailbox = MailboxRegionBytes(g.policy_slot_bytes);
  if (!RegionInside(h.ring_offset, ring, h.header_bytes, size) ||
      !RegionInside(h.names_offset, names, h.header_bytes, size) ||
      !RegionInside(h.mailbox_offset, mailbox, h.header_bytes, size)) {
    return SegmentError::kBadRegion;
  }
  if (!Disjoint(h.ring_offset, ring, h.names_offset, names) ||
      !Disjoint(h.ring_offset, ring, h.mailbox_offset, mailbox) ||
      !Disjoint(h.names_offset, names, h.mailbox_offset, mailbox)) {
    return SegmentError::kBadRegion;
  }
  return SegmentError::kOk;
}

SegmentError ValidateHeader(const SegmentHeader& h, std::uint64_t size) {
  // The version is the client's "ready" flag: load it first, with acquire, so every field the
  // client wrote before it is visible.
  const std::uint32_t version = h.layout_version.load(std::memory_order_acquire);
  if (version == 0) return SegmentError::kNotReady;
  if (h.magic != kSegmentMagic) return SegmentError::kBadMagic;
  if (VersionMajor(version) != kLayoutMajor) return SegmentError::kMajorMismatch;
  // An older or newer minor keeps the 1024-byte header (it only fills reserved space).
  if (h.header_bytes < sizeof(SegmentHeader) || h.header_bytes % kFalseSharing != 0 ||
      h.header_bytes > size) {
    return SegmentError::kBadHeaderBytes;
  }
  if (h.segment_bytes != size) return SegmentError::kSizeMismatch;
  return ValidateRegions(h, size);
}

void InitHeader(SegmentHeader* h, const SegmentGeometry& g, const Offsets& o) {
  h->magic = kSegmentMagic;
  h->header_bytes = sizeof(SegmentHeader);
  h->segment_bytes = o.total;
  h->ring_offset = o.ring;
  h->ring_capacity = g.ring_capacity;
  h->names_offset = o.names;
  h->names_capacity = g.names_capacity;
  h->mailbox_offset = o.mailbox;
  h->mailbox_slot_bytes = g.policy_slot_bytes;
  h->creator_pid = static_cast<std::int32_t>(getpid());
  h->start_time_ns = MonotonicNowNs();
  h->client_heartbeat_ns.store(h->start_time_ns, std::memory_order_relaxed);
  // Last, with release: the daemon treats 0 as "not ready".
  h->layout_version.store(PackVersion(kLayoutMajor, kLayoutMinor), std::memory_order_release);
}

}  // namespace

std::uint64_t MonotonicNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

const char* ToString(SegmentError error) {
  switch (error) {
    case SegmentError::kOk:
      return "ok";
    case SegmentError::kSystem:
      return "system call failed";
    case SegmentError::kBadGeometry:
      return "bad geometry (capacity not a power of two, too small or too large)";
    case SegmentError::kNotSealed:
      return "descriptor is not a memfd sealed against shrinking";
    case SegmentError::kTooSmall:
      return "segment smaller than its header";
    case SegmentError::kBadMagic:
      return "bad segment magic";
    case SegmentError::kNotReady:
      return "segment not initialised yet (layout version 0)";
    case SegmentError::kMajorMismatch:
      return "segment layout major version mismatch";
    case SegmentError::kBadHeaderBytes:
      return "bad segment header size";
    case SegmentError::kBadRegion:
      return "region outside the segment, misaligned or overlapping";
    case SegmentError::kSizeMismatch:
      return "segment size differs from the descriptor's size";
  }
  return "unknown segment error";
}

SegmentError ValidateGeometry(const SegmentGeometry& g) {
  if (!IsPowerOfTwo(g.ring_capacity) || g.ring_capacity < kMinRingCapacity ||
      g.ring_capacity > kMaxRingCapacity) {
    return SegmentError::kBadGeometry;
  }
  if (g.names_capacity % 8 != 0 || g.names_capacity > kMaxNamesCapacity) {
    return SegmentError::kBadGeometry;
  }
  if (g.policy_slot_bytes % kFalseSharing != 0 || g.policy_slot_bytes < kMinPolicySlotBytes ||
      g.policy_slot_bytes > kMaxPolicySlotBytes) {
    return SegmentError::kBadGeometry;
  }
  return SegmentError::kOk;
}

std::uint64_t SegmentBytes(const SegmentGeometry& geometry) {
  return ComputeOffsets(geometry).total;
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    Reset();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    fd_ = std::exchange(other.fd_, -1);
    ring_offset_ = other.ring_offset_;
    ring_capacity_ = other.ring_capacity_;
    names_offset_ = other.names_offset_;
    names_capacity_ = other.names_capacity_;
    mailbox_offset_ = other.mailbox_offset_;
    slot_bytes_ = other.slot_bytes_;
  }
  return *this;
}

Segment::~Segment() { Reset(); }

void Segment::Reset() {
  if (base_ != nullptr) munmap(base_, bytes_);
  CloseFd();
  base_ = nullptr;
  bytes_ = 0;
}

void Segment::CloseFd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

SegmentError Segment::Create(const SegmentGeometry& geometry, Segment* out) {
  if (ValidateGeometry(geometry) != SegmentError::kOk) return SegmentError::kBadGeometry;
  const Offsets offsets = ComputeOffsets(geometry);
  const int fd = memfd_create("chameleon-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return SegmentError::kSystem;
  Segment segment;
  segment.fd_ = fd;
  // Sealed against shrinking (and growing): the daemon can then never SIGBUS on a page the client
  // truncated away. F_SEAL_SEAL stops anyone changing the seals afterwards.
  if (ftruncate(fd, static_cast<off_t>(offsets.total)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return SegmentError::kSystem;
  }
  void* base = mmap(nullptr, offsets.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return SegmentError::kSystem;
  segment.base_ = static_cast<std::uint8_t*>(base);
  segment.bytes_ = offsets.total;
  segment.ring_offset_ = offsets.ring;
  segment.ring_capacity_ = geometry.ring_capacity;
  segment.names_offset_ = offsets.names;
  segment.names_capacity_ = geometry.names_capacity;
  segment.mailbox_offset_ = offsets.mailbox;
  segment.slot_bytes_ = geometry.policy_slot_bytes;
  InitHeader(segment.header(), geometry, offsets);  // the memfd is zero-filled already
  *out = std::move(segment);
  return SegmentError::kOk;
}

SegmentError Segment::Attach(int fd, Segment* out) {
  Segment segment;
  segment.fd_ = fd;  // closed by ~Segment on every error path
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return SegmentError::kSystem;
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) return SegmentError::kNotSealed;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < sizeof(SegmentHeader)) return SegmentError::kTooSmall;
  if (size > kMaxSegmentBytes) return SegmentError::kSizeMismatch;
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return SegmentError::kSystem;
  segment.base_ = static_cast<std::uint8_t*>(base);
  segment.bytes_ = size;
  const SegmentHeader& h = *segment.header();
  const SegmentError error = ValidateHeader(h, size);
  if (error != SegmentError::kOk) return error;
  // Cache the validated geometry; the header may change under us later.
  segment.ring_offset_ = h.ring_offset;
  segment.ring_capacity_ = h.ring_capacity;
  segment.names_offset_ = h.names_offset;
  segment.names_capacity_ = h.names_capacity;
  segment.mailbox_offset_ = h.mailbox_offset;
  segment.slot_bytes_ = h.mailbox_slot_bytes;
  *out = std::move(segment);
  return SegmentError::kOk;
}

EventRingProducer Segment::ring_producer() const {
  auto* descriptor = reinterpret_cast<EventRingDescriptor*>(base_ + ring_offset_);
  return {descriptor, base_ + ring_offset_ + sizeof(EventRingDescriptor), ring_capacity_};
}

EventRingConsumer Segment::ring_consumer() const {
  auto* descriptor = reinterpret_cast<EventRingDescriptor*>(base_ + ring_offset_);
  return {descriptor, base_ + ring_offset_ + sizeof(EventRingDescriptor), ring_capacity_};
}

NameTableWriter Segment::name_writer() const {
  auto* descriptor = reinterpret_cast<NameTableDescriptor*>(base_ + names_offset_);
  return {descriptor, base_ + names_offset_ + sizeof(NameTableDescriptor), names_capacity_};
}

NameTableReader Segment::name_reader() const {
  auto* descriptor = reinterpret_cast<const NameTableDescriptor*>(base_ + names_offset_);
  return {descriptor, base_ + names_offset_ + sizeof(NameTableDescriptor), names_capacity_};
}

PolicyMailboxWriter Segment::mailbox_writer() const {
  return {base_ + mailbox_offset_, slot_bytes_};
}

PolicyMailboxReader Segment::mailbox_reader() const {
  return {base_ + mailbox_offset_, slot_bytes_};
}

}  // namespace chameleon::ipc
