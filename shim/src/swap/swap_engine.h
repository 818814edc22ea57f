// The swap executor: VA-stable device allocations whose physical memory can be copied to pinned
// host memory and back while the program's pointer stays the same (docs/executor.md).
//
// Every transfer runs on one side stream and is ordered by events only:
//   SwapOut:  fence(compute) -> side waits -> DtoH into a host buffer -> out_done(side);
//             the chunks go back to the pool carrying out_done; the VA range is unmapped later
//             (deferred: nothing may use a range being unmapped, and simgpu's cuMemUnmap
//             synchronises the whole device).
//   SwapIn:   chunks from the pool (side waits on their fences) -> map -> HtoD -> ready(side);
//             WaitResident makes the consumer's stream wait on `ready`.
// The host never waits except on the counted slow paths: FaultIn (the safety net), a swap-in
// of a range whose stale mapping must go while its swap-out copy is still running, and
// FlushUnmaps(all=true).
//
// Thread-safe: every public method takes one internal mutex (these are rare, slow-path calls;
// the launch hot path only reads per-allocation flags kept by the shim).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "swap/chunk_pool.h"
#include "swap/counters.h"
#include "swap/driver_api.h"
#include "swap/host_pool.h"

namespace chameleon::shim::swap {

struct SwapEngineOptions {
  int device = 0;
  /// Physical chunk size; 0 = the device's VMM granularity (2 MiB). Rounded up to it.
  std::size_t chunk_bytes = 0;
  std::uint64_t device_limit_bytes = UINT64_MAX;   ///< cap on physical chunk bytes created
  std::uint64_t host_pool_cap_bytes = UINT64_MAX;  ///< cap on pinned host bytes held
  /// Fault injection (tests only): WaitResident does not make the consumer wait. Exists to prove
  /// that the data tests can see the race it opens.
  bool skip_swap_in_wait = false;
  /// Device bytes held outside the engine (the shim's passed-through allocations), counted
  /// against the limit: chunks are created only while created + external <= limit. May be null.
  const std::atomic<std::uint64_t>* external_bytes = nullptr;
};

/// Identity of an allocation (monotonic, never reused: a stale id simply finds nothing).
using AllocId = std::uint64_t;

enum class Residency : std::uint8_t { kUnknown, kResident, kSwappedOut };

/// Bits the engine mirrors into a caller-owned flags word (the shim's AllocationState::flags), so
/// the launch hot path can test residency with one relaxed load and no lock. Chosen clear of the
/// shim's own AllocationFlag bits (kNeverSwap = bit 0).
enum SwapFlag : std::uint32_t {
  kSwapFlagSwappedOut = 1u << 8,  ///< contents on the host: a touch needs FaultIn
  kSwapFlagInFlight = 1u << 9,    ///< swap-in issued, not known complete: consumers WaitResident
};

class SwapEngine {
 public:
  SwapEngine(const DriverApi& api, const SwapEngineOptions& options, SwapCounters* counters);
  ~SwapEngine();
  SwapEngine(const SwapEngine&) = delete;
  SwapEngine& operator=(const SwapEngine&) = delete;

  /// Creates the side stream and reads the granularity. The device's context must be current.
  CUresult Init();

  /// A swappable allocation: reserve (chunk-rounded) VA, map chunks, grant access. `stream` is
  /// where it will first be used: it waits on the fences of reused chunks. Under the limit,
  /// evicts resident allocations (closest size first) until the chunks fit.
  /// `flags`, if given, receives SwapFlag bits for the allocation's lifetime (it must outlive the
  /// allocation or be detached with AttachFlags(id, nullptr)).
  CUresult Allocate(std::size_t bytes, CUstream stream, CUdeviceptr* ptr, AllocId* id,
                    std::atomic<std::uint32_t>* flags = nullptr);
  /// Sets (or clears, with null) the flags word mirrored for `id`.
  void AttachFlags(AllocId id, std::atomic<std::uint32_t>* flags);
  /// Stream-ordered free: chunks are reusable after `stream` reaches this point; a host copy is
  /// dropped. The VA is unmapped and released by a later FlushUnmaps.
  CUresult Free(AllocId id, CUstream stream);

  /// Starts a swap-out after the work queued so far on `compute` (the last use).
  CUresult SwapOut(AllocId id, CUstream compute);
  /// Starts a swap-in on the side stream; no-op when resident.
  CUresult SwapIn(AllocId id);
  /// Makes `consumer` wait until the allocation's data is back (counts a prefetch hit or miss).
  /// Starts the swap-in first if nobody did.
  CUresult WaitResident(AllocId id, CUstream consumer);
  /// Safety net: brings the allocation back and waits on the host (a counted stall).
  CUresult FaultIn(AllocId id);
  /// Everything an op about to run on `stream` needs, under one lock: each swapped-out allocation
  /// is faulted in (FaultIn), each in-flight one makes `stream` wait (WaitResident), and none of
  /// `ids` can be evicted to make room for another. Unknown ids are skipped. Fails (typically
  /// CUDA_ERROR_OUT_OF_MEMORY: the op's own tensors do not fit the limit) without launching.
  CUresult PrepareUse(const AllocId* ids, std::size_t n, CUstream stream);
  /// Makes room for `bytes` allocated outside the engine: trims idle pooled chunks, then
  /// (counted stalls) waits for pending unmaps and evicts resident allocations. True when
  /// created chunk bytes + external bytes + `bytes` <= the limit afterwards.
  bool MakeRoom(std::uint64_t bytes);
  /// The driver refused an allocation made outside the engine although the accounting says it
  /// fits (the driver's own bookkeeping lags, e.g. stream-ordered frees not yet executed): gives
  /// at least `bytes` of chunks back to the driver, evicting if needed (counted stalls). False
  /// when nothing could be released.
  bool ReleaseBytes(std::uint64_t bytes);
  /// Changes the limit (e.g. the daemon's). A lower one takes effect as chunks are freed: idle
  /// pooled chunks are trimmed now, later takes evict.
  void SetDeviceLimit(std::uint64_t bytes);
  std::uint64_t device_limit() const;
  /// Bytes of chunks mapped to allocations (created minus pooled).
  std::uint64_t chunk_bytes_in_use() const;
  /// Unmaps swapped-out / freed ranges whose copies have completed; with `all`, also those still
  /// in flight (waits). Called at iteration boundaries.
  void FlushUnmaps(bool all = false);
  /// Gives idle pooled chunks (their fences complete) back to the driver; returns bytes released.
  /// A released chunk still mapped at a stale VA is freed by the driver once that is unmapped.
  std::uint64_t TrimPool();

  /// Marks an allocation never-swappable (IPC-exported) or swappable again.
  void SetPinned(AllocId id, bool pinned);
  /// Remembers the stream that last used the allocation (eviction records its fence there).
  void NoteUse(AllocId id, CUstream stream);

  /// The allocation containing `address`, or 0.
  AllocId Find(CUdeviceptr address) const;
  Residency State(AllocId id) const;
  /// True while the VA range of a swapped-out allocation is still mapped (unmap deferred).
  bool UnmapPending(AllocId id) const;
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::uint64_t chunk_bytes_created() const;
  CUstream side_stream() const { return side_; }  ///< for tests and diagnostics

 private:
  struct Allocation {
    AllocId id = 0;
    CUdeviceptr va = 0;
    std::size_t bytes = 0;  // requested
    std::size_t span = 0;   // chunk-rounded, reserved and mapped
    Residency state = Residency::kResident;
    bool mapped = true;  // VA has mappings (resident, or swapped with its unmap deferred)
    bool pinned = false;
    bool held = false;          // named by the op being prepared (PrepareUse): never evicted for it
    bool wait_counted = false;  // hit/miss counted for the current `ready`
    std::vector<std::uint32_t> chunks;  // mapped chunks, or the released ones when swapped
    std::vector<std::uint64_t> epochs;  // chunk epochs at release (Reclaim)
    void* host = nullptr;               // host copy while swapped out
    Fence* ready = nullptr;             // consumers wait on this (swap-in / reclaim done)
    Fence* out_done = nullptr;          // swap-out copy done
    CUstream last_stream = nullptr;
    std::atomic<std::uint32_t>* flags = nullptr;  // caller's word; SwapFlag bits mirrored
  };
  struct PendingUnmap {
    AllocId id = 0;  // swapped-out allocation, or 0 for a freed range
    CUdeviceptr va = 0;
    std::size_t span = 0;
    Fence* fence = nullptr;
  };

  Allocation* Get(AllocId id);
  const Allocation* Get(AllocId id) const;
  CUresult SwapOutLocked(Allocation* a, CUstream compute);
  /// `count_stall`: false inside FaultIn, which counts its whole wait as one stall.
  CUresult SwapInLocked(Allocation* a, bool count_stall = true);
  CUresult FaultInLocked(Allocation* a);
  CUresult MapNewLocked(CUdeviceptr va, std::size_t bytes, std::size_t span, CUstream stream,
                        AllocId* id, std::atomic<std::uint32_t>* flags);
  void FlushUnmapsLocked(bool all);
  /// Unmaps the ranges whose fences completed, then releases idle pooled chunks.
  std::uint64_t TrimLocked();
  /// Waits for the side stream and every pending unmap, then trims the pool (a counted stall).
  std::uint64_t DrainAndTrimLocked();
  CUresult WaitResidentLocked(Allocation* a, CUstream consumer);
  CUresult TakeChunks(std::uint32_t n, CUstream wait_stream, AllocId exclude,
                      std::vector<std::uint32_t>* out);
  bool EvictClosest(std::size_t bytes, AllocId exclude);
  CUresult MapChunks(CUdeviceptr va, const std::vector<std::uint32_t>& chunks);
  CUresult Unmap(CUdeviceptr va, std::size_t span);
  /// Unmaps a swapped-out allocation's stale range now; true if it had to wait for the copy.
  bool UnmapNow(Allocation* a);
  void Stall(std::uint64_t t0_ns);
  static void MirrorFlags(const Allocation* a);
  static std::uint64_t NowNs();

  DriverApi api_;
  SwapEngineOptions options_;
  SwapCounters* counters_;
  std::size_t chunk_bytes_ = 0;
  CUstream side_ = nullptr;
  mutable std::mutex mu_;
  std::unique_ptr<FencePool> fences_;
  std::unique_ptr<ChunkPool> chunks_;
  std::unique_ptr<HostPool> host_;
  AllocId next_id_ = 1;
  std::unordered_map<AllocId, std::unique_ptr<Allocation>> allocs_;
  std::map<CUdeviceptr, AllocId> by_address_;
  std::vector<PendingUnmap> pending_;
};

}  // namespace chameleon::shim::swap
