// The swap executor: VA-stable device allocations whose physical memory can be copied to pinned
// host memory and back while the program's pointer stays the same (docs/executor.md).
//
// Transfers run on two side streams, one per direction (the host link is full duplex), ordered
// by events only:
//   SwapOut:  out waits on fence(compute) [and on the host buffer's last read, and on an
//             unfinished swap-in of the same tensor] -> DtoH into a host buffer -> out_done(out);
//             the chunks go back to the pool carrying out_done; the VA range is unmapped later
//             (deferred: nothing may use a range being unmapped, and cuMemUnmap synchronises).
//   SwapIn:   chunks from the pool (in waits on their fences) -> map -> in waits on out_done
//             (the host copy is complete) -> HtoD -> ready(in); the host buffer goes back to its
//             pool carrying `ready`. WaitResident makes the consumer's stream wait on `ready`.
// The host never waits except on the counted slow paths: FaultIn (the safety net), a swap-in
// of a range whose stale mapping must go while its swap-out copy is still running, and
// FlushUnmaps(all=true). A stale mapping that must go is unmapped together with every other
// pending range whose copy is done: one device synchronisation for the whole batch.
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

#include "swap/allocation_flags.h"
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
  /// `flags`, if given, receives the kSwappedOut / kSwapInFlight bits (swap/allocation_flags.h) for
  /// the allocation's lifetime (it must outlive the allocation or be detached with AttachFlags(id,
  /// nullptr)).
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

  /// Program VMM (swap_adopt.cc, docs/executor.md "Program VMM"): an allocation at the
  /// program's own reserved, unmapped range [va, va + bytes) (chunk-aligned, a chunk multiple).
  /// The VA stays the program's: never reserved, released or address-freed here. If a reused
  /// chunk's last user may still run, the allocation starts in flight (consumers wait).
  CUresult Adopt(CUdeviceptr va, std::size_t bytes, AllocId* id,
                 std::atomic<std::uint32_t>* flags = nullptr);
  /// The program unmapped an adopted range (synchronous, as cuMemUnmap). `keep`: its contents
  /// must survive (the handle lives on) — its chunks (pinned) or host copy stay, detached from
  /// any VA and flags word until Rebind; otherwise dropped. Also drops a detached one.
  CUresult Unadopt(AllocId id, bool keep);
  /// Re-attaches a detached adopted allocation at `va` and faults it in there.
  CUresult Rebind(AllocId id, CUdeviceptr va, std::atomic<std::uint32_t>* flags);
  /// PrepareUse for an op that names `named` and may also reach `reach` (pages after a named
  /// address, never named themselves). Named ones are made resident; a reached one is made
  /// resident only if that evicts nothing, else its VA is mapped to host memory holding its
  /// contents (correct, slow access) until it is needed on the device.
  CUresult PrepareSpan(const AllocId* named, std::size_t n, const AllocId* reach, std::size_t m,
                       CUstream stream);
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
  /// The swap-in (host->device) stream; swap-outs run on out_stream(). For tests and diagnostics.
  CUstream side_stream() const { return side_; }
  CUstream out_stream() const { return out_; }  ///< the swap-out (device->host) stream

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
    std::atomic<std::uint32_t>* flags =
        nullptr;           // caller's word; kSwappedOut / kSwapInFlight mirrored
    bool adopted = false;  // Adopt: the VA is the program's (never address-freed here)
    CUmemGenericAllocationHandle host_map = 0;  // swapped out, VA mapped to host memory
  };
  /// A freed range kept for the next allocation of the same span (free_ranges.cc): while
  /// `mapped` and its chunks are untouched in the pool, it is reused as is (no VMM call);
  /// unmapped, its VA is (no reserve/free pair).
  struct FreeRange {
    CUdeviceptr va = 0;
    std::size_t span = 0;
    bool mapped = true;
    std::vector<std::uint32_t> chunks;  // released chunks, while mapped
    std::vector<std::uint64_t> epochs;
    Fence* fence = nullptr;  // the free's fence (one reference), while mapped
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
  /// Program VMM (swap_adopt.cc): maps a swapped-out range to host memory holding its contents
  /// (`stream` waits for the copy); and back: copies them back to the host buffer, unmaps.
  CUresult HostMapLocked(Allocation* a, CUstream stream);
  CUresult HostUnmapLocked(Allocation* a);
  CUresult MapNewLocked(CUdeviceptr va, std::size_t bytes, std::size_t span, CUstream stream,
                        AllocId* id, std::atomic<std::uint32_t>* flags);
  /// Returns the number of ranges unmapped. A non-empty batch counts one device_syncs unless
  /// `count_sync` is false (the caller already synchronised the device).
  std::size_t FlushUnmapsLocked(bool all, bool count_sync = true);
  /// Unmaps the ranges whose fences completed, then releases idle pooled chunks.
  std::uint64_t TrimLocked();
  // --- free-range cache (free_ranges.cc) ---
  /// Free of a resident allocation: its chunks are already released with `fence` (whose
  /// reference this takes); the range stays mapped and is cached.
  void CacheFreeRangeLocked(Allocation* a, Fence* fence);
  /// A cached range of `span` for a new allocation first used on `stream`: a mapped one whose
  /// chunks are intact (`*chunks` filled, `stream` waits on the free's fence), else an unmapped
  /// one (`*chunks` empty). 0 when none.
  CUdeviceptr ReuseFreeRangeLocked(std::size_t span, CUstream stream,
                                   std::vector<std::uint32_t>* chunks);
  /// Unmaps cached ranges whose free fence completed and whose chunks were reused (`all`: also
  /// the intact ones, so that trimmed chunks really return their memory), then releases the VA
  /// of unmapped ones beyond the cap. Returns the number unmapped.
  std::size_t FlushFreeRangesLocked(bool all);
  /// Unmaps and releases every cached range (destruction; the device is idle).
  void DropFreeRangesLocked();
  /// The allocation record for a mapped range.
  void TrackLocked(CUdeviceptr va, std::size_t bytes, std::size_t span,
                   std::vector<std::uint32_t> chunks, CUstream stream, AllocId* id,
                   std::atomic<std::uint32_t>* flags);
  /// Waits for the side stream and every pending unmap, then trims the pool (a counted stall).
  std::uint64_t DrainAndTrimLocked();
  CUresult WaitResidentLocked(Allocation* a, CUstream consumer);
  CUresult TakeChunks(std::uint32_t n, CUstream wait_stream, AllocId exclude,
                      std::vector<std::uint32_t>* out, std::vector<Fence*>* fences = nullptr);
  /// Chunks per copy: swap-outs copy (and release) a tensor in pieces of this many chunks, each
  /// with its own fence, and swap-ins wait per piece, so that a swap-in filling chunks another
  /// tensor's swap-out is emptying overlaps with it (the two directions of the link).
  std::size_t PieceChunks() const;
  /// The swap-out copy of `a` into `host`, piece by piece; releases each piece's chunks with
  /// its fence. Returns the last fence (its Record reference), or null (then nothing changed).
  Fence* CopyOutLocked(Allocation* a, void* host, CUresult* result);
  /// The swap-in copy into `a`'s (mapped) chunks; `waits` are their pool fences, in order.
  CUresult CopyInLocked(Allocation* a, const std::vector<Fence*>& waits);
  bool EvictClosest(std::size_t bytes, AllocId exclude);
  CUresult MapChunks(CUdeviceptr va, const std::vector<std::uint32_t>& chunks);
  CUresult Unmap(CUdeviceptr va, std::size_t span);
  /// Unmaps a swapped-out allocation's stale range now; true if it had to wait for the copy.
  bool UnmapNow(Allocation* a);
  /// The swap-in of `a` needs its stale range unmapped: unmaps it and, in the same breath, every
  /// other pending range whose copy has completed (one device synchronisation covers them all).
  void ForceUnmapLocked(Allocation* a, bool count_stall);
  /// Unmapped, swapped out, its old chunks untouched in the pool: takes them back and maps them
  /// again (no copy). False if they were reused (or the map failed: nothing changed then).
  bool RemapReclaimLocked(Allocation* a);
  /// The allocation is resident again on its old chunks: no copy was needed.
  void FinishReclaimLocked(Allocation* a);
  /// Makes both side streams' work so far complete (a host wait).
  void SyncSideStreams();
  void Stall(std::uint64_t t0_ns);
  static void MirrorFlags(const Allocation* a);
  static std::uint64_t NowNs();

  DriverApi api_;
  SwapEngineOptions options_;
  SwapCounters* counters_;
  std::size_t chunk_bytes_ = 0;
  CUstream side_ = nullptr;  // swap-ins (HtoD); chunk waits for them
  CUstream out_ = nullptr;   // swap-outs (DtoH)
  mutable std::mutex mu_;
  std::unique_ptr<FencePool> fences_;
  std::unique_ptr<ChunkPool> chunks_;
  std::unique_ptr<HostPool> host_;
  AllocId next_id_ = 1;
  std::unordered_map<AllocId, std::unique_ptr<Allocation>> allocs_;
  std::map<CUdeviceptr, AllocId> by_address_;
  std::vector<PendingUnmap> pending_;
  std::multimap<std::size_t, FreeRange> free_ranges_;  // span -> range, oldest first per span
};

}  // namespace chameleon::shim::swap
