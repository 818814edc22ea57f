// Payloads of the records the shim writes into the event ring. Each payload follows a
// RecordHeader; all fields are fixed width and little-endian (the ring never leaves the node).
//
// Who stamps time: nothing per op in lightweight mode (a clock read per launch would cost more
// than the rest of the hot path). IterationMark records carry the host CLOCK_MONOTONIC time and
// the device time of the finished iteration measured with CUDA events (virtual time on simgpu).
// Records written during a detailed iteration carry RecordFlag kFlagDetailed; its ops are timed
// with CUDA events around each one (kOpTimes, sent when it ends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace chameleon::ipc {

enum class RecordType : std::uint16_t {
  kPadding = 0,         ///< filler to the end of the ring, or a repaired (dead writer) record
  kLaunch = 1,          ///< kernel launch (an op)
  kCopy = 2,            ///< memcpy (an op)
  kMemset = 3,          ///< memset (an op)
  kAlloc = 4,           ///< allocation became live (event, not an op)
  kFree = 5,            ///< allocation freed (event)
  kSync = 6,            ///< host synchronisation
  kIterationMark = 7,   ///< the shim saw the boundary signature the daemon sent
  kMemInfo = 8,         ///< memory in use after an op (detailed mode only)
  kPointerTargets = 9,  ///< allocations a pointer-table scan found pointed to (layout 1.2)
  kOpTimes = 10,        ///< device time of ops of the detailed iteration (layout 1.8)
};

enum RecordFlag : std::uint16_t {
  kFlagDetailed = 1u << 0,  ///< written while recording a detailed iteration
  kFlagCapture = 1u << 1,   ///< issued while the stream was capturing a graph
  /// On a kIterationMark only: `generation` is the one the swap executor installed at this
  /// boundary, so it is in force for the whole interval the boundary starts (policies change only
  /// at boundaries). Without it (executor off, an older shim) the generation is the one the
  /// client acknowledged, which may have changed mid-interval. Older readers ignore the bit.
  kFlagGenerationInstalled = 1u << 2,
  /// On a kIterationMark only (layout 1.7): `executor_wait_ns` is measured — the swap executor
  /// reads the driver's virtual clocks (simgpu). Without it the field means nothing.
  kFlagExecutorWait = 1u << 3,
};
static_assert(sizeof(RecordFlag) == 2 && kFlagGenerationInstalled == 4 && kFlagExecutorWait == 8);

/// Op tokens 1..15 are reserved for driver ops that are not kernels; kernels start at 16.
/// Token 0 is "unknown".
enum ReservedToken : std::uint32_t {
  kTokenUnknown = 0,
  kTokenCopyHtoD = 1,
  kTokenCopyDtoH = 2,
  kTokenCopyDtoD = 3,
  kTokenCopyPeer = 4,
  kTokenMemset = 5,
  kTokenGraphLaunch = 6,
  kFirstKernelToken = 16,
};

/// Allocation id 0 means "not a tracked allocation".
inline constexpr std::uint64_t kNoAllocation = 0;

/// kLaunch: followed by `tensor_count` u64 allocation ids (the tracked allocations the
/// arguments point into, in argument order, duplicates removed).
struct LaunchRecord {
  std::uint32_t token;
  std::uint16_t tensor_count;
  std::uint16_t device;
  std::uint64_t stream;  ///< CUstream handle value (0 = legacy default)
  // std::uint64_t tensors[tensor_count];
};
static_assert(sizeof(LaunchRecord) == 16);
static_assert(offsetof(LaunchRecord, token) == 0);
static_assert(offsetof(LaunchRecord, tensor_count) == 4);
static_assert(offsetof(LaunchRecord, device) == 6);
static_assert(offsetof(LaunchRecord, stream) == 8);
/// Tensors recorded per launch at most; a launch touching more records the first ones only
/// (bounded hot-path cost), which the daemon sees as tensor_count == kMaxLaunchTensors.
inline constexpr std::size_t kMaxLaunchTensors = 64;

/// kCopy: an op; src/dst are allocation ids (kNoAllocation for host or untracked memory).
struct CopyRecord {
  std::uint32_t token;  ///< kTokenCopy*
  std::uint16_t device;
  std::uint16_t reserved;
  std::uint64_t stream;
  std::uint64_t src;
  std::uint64_t dst;
  std::uint64_t bytes;
};
static_assert(sizeof(CopyRecord) == 40);
static_assert(offsetof(CopyRecord, stream) == 8);
static_assert(offsetof(CopyRecord, src) == 16);
static_assert(offsetof(CopyRecord, dst) == 24);
static_assert(offsetof(CopyRecord, bytes) == 32);

/// kMemset: an op.
struct MemsetRecord {
  std::uint32_t token;  ///< kTokenMemset
  std::uint16_t device;
  std::uint16_t reserved;
  std::uint64_t stream;
  std::uint64_t dst;
  std::uint64_t bytes;
};
static_assert(sizeof(MemsetRecord) == 32);
static_assert(offsetof(MemsetRecord, dst) == 16);

enum class AllocKind : std::uint8_t {
  kPlain = 0,   ///< cuMemAlloc / cuMemAllocPitch
  kAsync = 1,   ///< cuMemAllocAsync / cuMemAllocFromPoolAsync
  kVmmMap = 2,  ///< cuMemMap of physical memory into a reserved range
  kHost = 3,    ///< pinned host memory (not device bytes)
};

/// kAlloc.
struct AllocRecord {
  std::uint64_t id;       ///< never reused within a process (monotonic, starts at 1)
  std::uint64_t address;  ///< device virtual address
  std::uint64_t bytes;
  std::uint64_t stream;  ///< for async allocations, else 0
  std::uint16_t device;
  std::uint8_t kind;       ///< AllocKind
  std::uint8_t swappable;  ///< 0 if exported/IPC or below the swap granularity
  std::uint32_t reserved;
};
static_assert(sizeof(AllocRecord) == 40);
static_assert(offsetof(AllocRecord, address) == 8);
static_assert(offsetof(AllocRecord, bytes) == 16);
static_assert(offsetof(AllocRecord, stream) == 24);
static_assert(offsetof(AllocRecord, device) == 32);
static_assert(offsetof(AllocRecord, kind) == 34);

/// kFree.
struct FreeRecord {
  std::uint64_t id;
  std::uint64_t stream;  ///< for async frees, else 0
};
static_assert(sizeof(FreeRecord) == 16);

enum class SyncKind : std::uint8_t { kContext = 0, kStream = 1, kEvent = 2 };

/// kSync.
struct SyncRecord {
  std::uint64_t stream;
  std::uint8_t kind;  ///< SyncKind
  std::uint8_t reserved[7];
};
static_assert(sizeof(SyncRecord) == 16);

/// kIterationMark: written by the shim when it sees the boundary signature. Boundary b (the
/// b-th seen, b >= 1) starts *interval b*, which ends at boundary b + 1.
///
/// Device time is measured with one CUDA event per boundary and queried without blocking; the
/// host runs ahead of the device, so the interval that just ended is rarely complete. The mark
/// therefore carries the newest completed interval not reported before, and says which one it is
/// (`timed_iteration`). The daemon credits interval j to the generation of mark j when that mark
/// carries kFlagGenerationInstalled, else to the policy generation that was in force at both of
/// its boundaries (`generation` of marks j and j + 1).
struct IterationMarkRecord {
  std::uint64_t iteration;       ///< b: the shim's count of boundaries seen (starts at 1)
  std::uint64_t host_time_ns;    ///< CLOCK_MONOTONIC when the boundary op was launched
  std::uint64_t device_time_ns;  ///< device time of interval `timed_iteration` (0 = none)
  std::uint64_t ops;             ///< ops the shim counted in interval b - 1
  // --- layout 1.1 (a 1.0 writer's record ends above; the reader zero-fills) ---
  std::uint64_t timed_iteration;  ///< which interval device_time_ns measures (0 = none/unknown)
  std::uint64_t generation;       ///< policy generation in force at this boundary (0 = none)
  // --- layout 1.7 (a 1.1 writer's record ends above) ---
  /// With kFlagExecutorWait: the time the streams of interval `timed_iteration` waited for the
  /// swap executor (swap-ins before their consumers, fault-ins, chunks at allocations), in the
  /// driver's virtual ns. The daemon takes it out of device_time_ns to time the profile's compute.
  std::uint64_t executor_wait_ns;
};
static_assert(sizeof(IterationMarkRecord) == 56);
static_assert(offsetof(IterationMarkRecord, device_time_ns) == 16);
static_assert(offsetof(IterationMarkRecord, timed_iteration) == 32);
static_assert(offsetof(IterationMarkRecord, generation) == 40);
static_assert(offsetof(IterationMarkRecord, executor_wait_ns) == 48);
/// Payload bytes of a layout-1.0 mark: the minimum a reader accepts.
inline constexpr std::size_t kIterationMarkV10Bytes = 32;

/// kMemInfo (detailed mode): device bytes live after the preceding op.
struct MemInfoRecord {
  std::uint64_t bytes_live;
  std::uint16_t device;
  std::uint16_t reserved[3];
};
static_assert(sizeof(MemInfoRecord) == 16);

/// kPointerTargets (layout 1.2; an older daemon skips it as an unknown type): the shim's sampled
/// pointer-table scan (docs/executor.md, "Pointer tables") found device words pointing into these
/// allocations, which the shim pins (never swaps) while they live. The daemon names them by
/// their tensors' match keys so later candidates exclude the same tensors even when the program
/// allocates them afresh. Followed by `count` u64 allocation ids (AllocRecord::id); a scan with
/// more targets than one record holds sends several records with the same `scan`.
struct PointerTargetsRecord {
  std::uint32_t count;
  std::uint32_t reserved;
  std::uint64_t scan;  ///< the shim's scan number (1, 2, ...)
  // std::uint64_t ids[count];
};
static_assert(sizeof(PointerTargetsRecord) == 16);
static_assert(offsetof(PointerTargetsRecord, scan) == 8);
/// Ids per PointerTargets record at most (its payload stays far below kMaxRecordBytes).
inline constexpr std::size_t kMaxPointerTargetsPerRecord = 256;

/// kOpTimes (layout 1.8; an older daemon skips it as an unknown type): the device time of ops of
/// the detailed iteration that just ended, measured with a CUDA event before each op (after the
/// swap executor's waits) and one after it, on the op's stream. Written with kFlagDetailed after
/// the iteration's last op and before the IterationMark that closes it, so the daemon has them
/// when it builds the profile (docs/detection.md, "Per-op device time"). `op` counts the
/// iteration's detailed op records in ring order from 0; ops without an entry (graph capture,
/// another thread's op still in flight, more ops than the shim times) were not measured.
struct OpTimesRecord {
  std::uint32_t count;
  std::uint32_t reserved;
  // OpTime entries[count];
};
static_assert(sizeof(OpTimesRecord) == 8);
struct OpTime {
  std::uint32_t op;
  std::uint32_t device_ns;  ///< saturated at 2^32 - 1 (4.29 s)
};
static_assert(sizeof(OpTime) == 8 && offsetof(OpTime, device_ns) == 4);
/// Entries per OpTimes record at most (2 KiB of payload, below kMaxRecordBytes).
inline constexpr std::size_t kMaxOpTimesPerRecord = 256;

static_assert(std::is_trivially_copyable_v<LaunchRecord> &&
              std::is_trivially_copyable_v<AllocRecord>);

}  // namespace chameleon::ipc
