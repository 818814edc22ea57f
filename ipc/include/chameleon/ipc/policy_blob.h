// The policy blob carried by the mailbox: what the daemon tells a shim to do.
// Versioned, length-prefixed, checksummed (CRC-32 from zlib) and made of typed sections so an
// older reader skips sections it does not know. All integers little-endian.
//
//   PolicyBlobHeader (32 bytes)
//   section*: PolicySectionHeader (16 bytes) + data padded to 8 bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chameleon::ipc {

/// "CHPL" little-endian.
inline constexpr std::uint32_t kPolicyBlobMagic = 0x4c504843u;
inline constexpr std::uint16_t kPolicyBlobMajor = 1;
/// Minor 1: SwapEntry's former `reserved` word is `out_arg` + `entry_flags` (a 1.0 writer sent
/// zeros there, which a 1.1 reader reads as "argument 0, no flags": still a valid entry).
/// Minor 2: the kLeases section (a 1.1 reader skips it and keeps every entry on host memory).
/// Minor 3: PolicySummary::predicted_in_wait_s (a 1.2 reader reads the 64 bytes it knows).
inline constexpr std::uint16_t kPolicyBlobMinor = 3;

struct PolicyBlobHeader {
  std::uint32_t magic;
  std::uint16_t major;
  std::uint16_t minor;
  std::uint32_t header_bytes;  ///< sizeof(PolicyBlobHeader) as written
  std::uint32_t section_count;
  std::uint64_t payload_bytes;  ///< bytes after the header
  std::uint32_t crc32;          ///< CRC-32 of the payload
  std::uint32_t reserved;
};
static_assert(sizeof(PolicyBlobHeader) == 32);
static_assert(offsetof(PolicyBlobHeader, payload_bytes) == 16);
static_assert(offsetof(PolicyBlobHeader, crc32) == 24);

enum class PolicySection : std::uint32_t {
  kSummary = 1,      ///< PolicySummary
  kBoundary = 2,     ///< u32 tokens: the iteration boundary signature (an n-gram)
  kSwapEntries = 3,  ///< SwapEntry[]
  kExcluded = 4,     ///< u64 match keys never to swap
  kLeases = 5,       ///< LeaseGrant[]: peer memory this client may hold (since 1.2)
};

struct PolicySectionHeader {
  std::uint32_t type;  ///< PolicySection
  std::uint32_t reserved;
  std::uint64_t bytes;  ///< data bytes (before padding)
};
static_assert(sizeof(PolicySectionHeader) == 16);

/// Stage of the daemon's stage machine for this client.
enum class Stage : std::uint32_t { kWarmup = 0, kGenPolicy = 1, kStable = 2 };

struct PolicySummary {
  std::uint64_t generation;          ///< daemon's policy generation for this client
  std::uint32_t stage;               ///< Stage
  std::uint32_t flags;               ///< reserved
  std::uint64_t device_limit_bytes;  ///< 0 = no limit from the daemon
  std::uint64_t predicted_peak_bytes;
  double predicted_iteration_s;
  double predicted_stall_s;
  std::uint64_t iteration_ops;  ///< ops per iteration the daemon detected
  // --- since 1.2 (a 1.1 summary is 56 bytes; the reader zero-fills what follows) ---
  /// Bytes of this client's GPU the daemon has lent to other clients: `device_limit_bytes` is
  /// already lowered by them. Non-zero tells the shim to ask for them back
  /// (SegmentHeader::reclaim_request_bytes) when it is short of memory.
  std::uint64_t lent_bytes;
  // --- since 1.3 (a 1.2 summary is 64 bytes; the reader zero-fills what follows) ---
  /// Part of predicted_stall_s the compute stream spends waiting for swap-ins before their uses
  /// (the plan replayed on the executor's streams); the rest waits for memory a swap-out still
  /// copies. 0 from an older daemon: unknown.
  double predicted_in_wait_s;
};
/// The 1.0/1.1 summary: a shorter summary than this is malformed.
inline constexpr std::size_t kPolicySummaryMinBytes = 56;
static_assert(sizeof(PolicySummary) == 72);
static_assert(offsetof(PolicySummary, lent_bytes) == kPolicySummaryMinBytes);
static_assert(offsetof(PolicySummary, predicted_in_wait_s) == 64);

/// Where swapped bytes go. Host (the process's local pinned memory) is the default; node
/// placement fills the others. `SwapEntry::helper` names the peer GPU (by the RECEIVING client's
/// own device ordinal: ordinals differ per process) or the host NUMA node.
enum class Tier : std::uint16_t { kHost = 0, kPeerGpu = 1, kHostNuma = 2 };

/// One tensor to swap. Triggers are anchored on (token, occurrence of that token within the
/// iteration), so ops inserted elsewhere do not shift them.
struct SwapEntry {
  std::uint64_t match_key;  ///< hash of the tensor's integer features (policy/matcher.h)
  std::uint64_t bytes;
  std::uint32_t use_count;       ///< feature: ops using it in the iteration
  std::uint32_t token_tag;       ///< feature: bit-OR of (1 << token % 32) over its users
  std::uint32_t out_token;       ///< swap out after this op ...
  std::uint32_t out_occurrence;  ///< ... at this occurrence (0-based)
  std::uint32_t in_token;        ///< start the swap-in before this op ...
  std::uint32_t in_occurrence;
  std::uint32_t use_token;  ///< first use after the gap (wait on the swap-in before it)
  std::uint32_t use_occurrence;
  std::uint16_t tier;    ///< Tier
  std::uint16_t helper;  ///< peer device ordinal or NUMA node for non-host tiers
  /// Which tensor of the out-anchor op this entry is: its index among that op's tensors in record
  /// order (a launch's tensor ids as the shim lists them; a copy's source then destination; a
  /// memset's destination). The shim binds the entry to that tensor after the op (since 1.1).
  std::uint16_t out_arg;
  std::uint16_t entry_flags;  ///< SwapEntryFlag bits (since 1.1)
};
static_assert(sizeof(SwapEntry) == 56);
static_assert(offsetof(SwapEntry, out_token) == 24);
static_assert(offsetof(SwapEntry, use_token) == 40);
static_assert(offsetof(SwapEntry, tier) == 48);
static_assert(offsetof(SwapEntry, out_arg) == 52);
static_assert(offsetof(SwapEntry, entry_flags) == 54);

/// Bits of SwapEntry::entry_flags.
enum SwapEntryFlag : std::uint16_t {
  /// The in and use anchors lie in the NEXT iteration (the plan's in_start_op / use_op are at or
  /// past the iteration's op count): the binding made at the out anchor survives the boundary.
  kEntryWraps = 1u << 0,
};
/// out_arg value of an entry whose tensor was not found among its out-anchor op's tensors.
inline constexpr std::uint16_t kOutArgUnknown = 0xffff;

/// Permission to hold up to `bytes` on one peer GPU, lent by the daemon out of another client's
/// (or an idle GPU's) spare memory. Leases are the authority, entries only the preference: an
/// entry with tier kPeerGpu whose helper has no lease in the policy in force goes to host memory,
/// and when a new policy drops or shrinks a lease the executor moves what it holds there beyond
/// the new cap back to host memory, then reports the policy's generation in
/// SegmentHeader::leases_applied_generation (the daemon's proof that a revocation completed).
struct LeaseGrant {
  std::uint64_t lease_id;  ///< daemon-wide, never reused; for logs, metrics and chameleonctl
  std::uint64_t bytes;     ///< most bytes this client may hold on that GPU
  std::uint16_t helper;    ///< the receiving client's device ordinal of the lending GPU
  std::uint16_t flags;     ///< reserved, 0
  std::uint32_t reserved;
};
static_assert(sizeof(LeaseGrant) == 24);
static_assert(offsetof(LeaseGrant, bytes) == 8);
static_assert(offsetof(LeaseGrant, helper) == 16);

/// The decoded policy.
struct Policy {
  PolicySummary summary{};
  std::vector<std::uint32_t> boundary;
  std::vector<SwapEntry> entries;
  std::vector<std::uint64_t> excluded;
  std::vector<LeaseGrant> leases;
};

enum class BlobError : std::uint8_t {
  kOk,
  kTruncated,  ///< fewer bytes than a header or section says
  kBadMagic,
  kMajorMismatch,
  kBadHeaderBytes,
  kBadChecksum,
  kBadSection,  ///< a known section whose size is not a multiple of its element
  kMissingSummary,
};
const char* ToString(BlobError error);

/// Serialises `policy`; appends to `out`.
void EncodePolicy(const Policy& policy, std::vector<std::uint8_t>* out);
/// Validates and decodes; unknown sections are skipped.
BlobError DecodePolicy(std::span<const std::uint8_t> blob, Policy* policy);

}  // namespace chameleon::ipc
