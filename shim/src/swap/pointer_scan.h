// Sampled detection of device-side pointer tables (docs/executor.md, "Pointer tables").
//
// A kernel that reads device pointers out of device memory (an array of tensor addresses, a
// struct of pointers) touches allocations no launch argument names: neither the policy's
// consumer wait nor the safety net can protect them, so they must never be swapped. At the end
// of the detailed iteration the shim copies bounded samples of every live tracked allocation to
// the host and looks for 8-byte aligned words whose value lies inside a tracked allocation; the
// allocations they point into are the *targets* to pin.
//
// Split in two so the word logic is testable without a driver:
//   - pure: PlanSamples (which bytes of which allocation), RangeIndex + ScanWords (which words
//     point where), ScanSamples (plan -> copy -> scan, with the copy abstracted as SampleSource);
//   - driver: ScanPointerTables / FindPointerTargets copy through DriverApi (DtoH on a stream
//     into a pinned staging buffer, one event wait per batch).
//
// What this does not see (stated precisely in docs/executor.md): tables outside the sampled
// bytes, pointers written after the scan, pointers into untracked memory, pointers that are not
// stored as aligned 8-byte words, and ranges the caller marks unreadable (scan = false).
// Thread-safety: the free functions are reentrant; RangeIndex is immutable after construction.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "chameleon/ipc/event_records.h"
#include "swap/driver_api.h"

namespace chameleon::shim::swap {

/// One live tracked allocation. Ranges must not overlap.
struct Range {
  CUdeviceptr base = 0;
  std::uint64_t bytes = 0;
  /// False: a possible target only, never read (swapped out / unmapped: reading would fault).
  bool scan = true;
};

struct ScanOptions {
  std::uint64_t head_bytes = 4096;    ///< sampled at the start of every allocation
  std::uint64_t tail_bytes = 4096;    ///< ... and at its end
  std::uint32_t windows = 4;          ///< strided windows, one centred in each interior slice
  std::uint64_t window_bytes = 4096;  ///< size of each window
  /// Bytes copied per scan, all allocations together. Smallest allocations are sampled first
  /// (pointer tables are small: 8 bytes per entry); what does not fit is not sampled (counted).
  std::uint64_t budget_bytes = 16u << 20;
  std::uint64_t staging_bytes = 1u << 20;  ///< pinned staging buffer: bytes per copy batch
  CUstream stream = nullptr;  ///< stream of the copies (legacy default: after blocking streams)
};

/// A piece of an allocation to sample: bytes [offset, offset + bytes) of ranges[range].
struct Segment {
  std::uint32_t range = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

/// "ranges[table] holds `count` words pointing into ranges[target]".
struct PointerLink {
  std::uint32_t table = 0;
  std::uint32_t target = 0;
  std::uint64_t count = 0;
};

struct ScanStats {
  std::uint64_t ranges_sampled = 0;    ///< at least one byte read
  std::uint64_t ranges_complete = 0;   ///< every byte read (small allocations)
  std::uint64_t ranges_unsampled = 0;  ///< readable but left out by the budget
  std::uint64_t bytes_copied = 0;
  std::uint64_t words_scanned = 0;
  std::uint64_t batches = 0;  ///< host waits (one per staging batch)
};

struct ScanResult {
  std::vector<PointerLink> links;    ///< sorted by (table, target)
  std::vector<CUdeviceptr> targets;  ///< bases of the distinct target ranges, ascending
  ScanStats stats;
  CUresult error = CUDA_SUCCESS;  ///< first driver error; the result then covers what was read
};

/// Sorted view of the ranges for word classification. Immutable; thread-safe to share.
class RangeIndex {
 public:
  explicit RangeIndex(std::span<const Range> ranges);
  /// Index (into the constructor's span) of the range containing `address`, or -1.
  std::int64_t Find(std::uint64_t address) const;
  /// Every tracked address a is in [lo(), lo() + span()): one compare rejects most words.
  std::uint64_t lo() const { return lo_; }
  std::uint64_t span() const { return span_; }

 private:
  std::vector<std::uint64_t> starts_;  // ascending
  std::vector<std::uint64_t> ends_;
  std::vector<std::uint32_t> index_;  // position -> index in the caller's span
  std::uint64_t lo_ = 0;
  std::uint64_t span_ = 0;
};

/// Which bytes to read: for each readable range, smallest first, the whole range when it is no
/// larger than the full sample (head + tail + windows); otherwise head, tail and the windows
/// (offsets 8-byte aligned), until `budget_bytes` is used up. Fills the ranges_* stats.
std::vector<Segment> PlanSamples(std::span<const Range> ranges, const ScanOptions& options,
                                 ScanStats* stats);

/// Scans `bytes` of data copied from device address `address` (which lies in
/// ranges[source]): every 8-byte word aligned in *device* addresses whose value falls inside a
/// range other than `source` appends or extends a link in `links` (consecutive hits on the same
/// target extend the last link; ScanSamples merges the rest). Returns the words scanned.
std::uint64_t ScanWords(const unsigned char* data, std::size_t bytes, std::uint64_t address,
                        std::uint32_t source, const RangeIndex& index,
                        std::vector<PointerLink>* links);

/// Where ScanSamples gets its bytes: queue copies into host memory, then wait for all of them.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual CUresult Copy(void* dst, CUdeviceptr src, std::size_t bytes) = 0;
  virtual CUresult Wait() = 0;
};

/// Plan -> copy in batches of at most `staging_bytes` into `staging` -> scan -> merged links
/// and distinct targets. `staging` must hold options.staging_bytes bytes (8-byte aligned).
ScanResult ScanSamples(std::span<const Range> ranges, const ScanOptions& options,
                       SampleSource* source, unsigned char* staging);

/// ScanSamples over the driver: DtoH copies on options.stream into a pinned staging buffer
/// (cuMemHostAlloc, freed before returning), one event wait per batch. The device's context must
/// be current, and every range with scan = true must stay allocated and mapped for the call
/// (reading a freed or unmapped range is a device fault).
ScanResult ScanPointerTables(const DriverApi& api, std::span<const Range> ranges,
                             const ScanOptions& options);

/// The shim's entry point: the bases of the ranges that some sampled word points into — the
/// allocations to mark never-swap. On a driver error the scan stops: the targets found before it
/// are returned (each is a real pointer, safe to pin); use ScanPointerTables to see the error.
std::vector<CUdeviceptr> FindPointerTargets(const DriverApi& api, std::span<const Range> ranges,
                                            const ScanOptions& options);

/// The payloads of the RecordType::kPointerTargets records that tell the daemon about scan
/// `scan`'s targets (their allocation ids; 0 = untracked, left out): PointerTargetsRecord + ids,
/// at most ipc::kMaxPointerTargetsPerRecord ids each. Empty when no id is left.
std::vector<std::vector<std::uint8_t>> EncodePointerTargets(std::uint64_t scan,
                                                            std::span<const std::uint64_t> ids);

}  // namespace chameleon::shim::swap
