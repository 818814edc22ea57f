// The swap executor: VA-stable device allocations whose physical memory can be copied to pinned
// host memory and back while the program's pointer stays the same (docs/executor.md).
//
// SwapEngine is a facade: it takes the lock and hands each call to the part that does the job.
//   AllocationTable    the allocation records, by id and address; residency flags mirrored
//   VaMapper           counted VMM calls: map chunks at a VA, unmap, reserve, free
//   FreeRangeCache     freed ranges kept mapped, reused whole by the next allocation of a span
//   UnmapBatcher       deferred unmaps, done in batches (cuMemUnmap synchronises the device)
//   TransferScheduler  swap-out/in copies on the two duplex side streams, in 4 MiB pieces, by
//                      fences; moves a copy from a peer back to host memory
//   Destinations       where swapped bytes go: a peer GPU under a lease, a host NUMA node, or
//                      local host memory (the fallback for every refusal)
//   LeaseSettler       what is held on peers kept within the policy's leases (revocation)
//   Evictor            room under the limit: trim, drain, evict (farthest next use / closest size)
//   UseHistory         the previous iteration's use positions per tensor (for the Evictor)
//   Allocator          the engine's own allocations: VA, chunks, mappings, record; free
//   ResidencyManager   swap-in, consumer waits, the synchronous fault-in, op preparation
//   HostMapper         program VMM: a swapped-out VA mapped to host memory and back
//   AdoptedRanges      program VMM: ranges the program reserved itself (adopt/unadopt/rebind)
// beside the pools they share (ChunkPool, FencePool, HostPool).
//
// The host never waits except on the counted slow paths: FaultIn (the safety net), a swap-in
// of a range whose stale mapping must go while its swap-out copy is still running, and
// FlushUnmaps(all=true).
//
// Thread-safe: every public method takes one internal mutex (these are rare, slow-path calls;
// the launch hot path only reads per-allocation flags kept by the shim). The parts are not
// thread-safe and are only used under that mutex.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "swap/adopted_ranges.h"
#include "swap/allocation_table.h"
#include "swap/allocator.h"
#include "swap/chunk_pool.h"
#include "swap/counters.h"
#include "swap/destinations.h"
#include "swap/driver_api.h"
#include "swap/evictor.h"
#include "swap/free_range_cache.h"
#include "swap/host_mapper.h"
#include "swap/host_pool.h"
#include "swap/lease_settler.h"
#include "swap/placement.h"
#include "swap/residency_manager.h"
#include "swap/transfer_scheduler.h"
#include "swap/unmap_batcher.h"
#include "swap/va_mapper.h"

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
  /// The safety net's victim rule (Evictor; CHAMELEON_EVICTION).
  EvictionRule eviction = EvictionRule::kBelady;
  /// CHAMELEON_PLACEMENT: `kHost` keeps every swapped byte in local host memory.
  PlacementMode placement = PlacementMode::kAuto;
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

  /// Starts a swap-out after the work queued so far on `compute` (the last use), its copy at
  /// `want` if Destinations allows it there, else in local host memory.
  CUresult SwapOut(AllocId id, CUstream compute, Placement want = {});
  /// The leases of the policy `generation` now in force (PolicyRunner, at its switch): caps on
  /// peer GPUs; what is held beyond them is moved back to host memory (LeaseSettler).
  void ApplyLeases(std::span<const ipc::LeaseGrant> leases, std::uint64_t generation);
  /// An iteration boundary: continues a revocation still in progress (cheap otherwise).
  void SettleLeases();
  /// Owner side: bytes of this GPU the daemon lent to other clients (the summary's lent_bytes).
  /// While non-zero, the safety net's evictions ask for them back (reclaim_request_bytes); a new
  /// value clears the request (the daemon has answered).
  void SetLentBytes(std::uint64_t bytes);
  /// Bytes held on peer GPUs (buffers idle and in use).
  std::uint64_t peer_held_bytes() const;
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
  /// in flight (waits). Called at iteration boundaries and after the program's syncs. Without
  /// `all`, does nothing while a swap copy is in flight (an unmap would make the host wait for
  /// it) unless kMaxDeferredUnmaps ranges are pending.
  void FlushUnmaps(bool all = false);
  /// Gives idle pooled chunks (their fences complete) back to the driver; returns bytes released.
  /// A released chunk still mapped at a stale VA is freed by the driver once that is unmapped.
  std::uint64_t TrimPool();

  /// Program VMM (AdoptedRanges, docs/executor.md "Program VMM"): an allocation at the
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

  /// The op at `position` (from the iteration boundary) uses `ids` (0 = not the engine's): the
  /// use sequence the Belady rule reads next iteration. Lock-free, allocation-free (launch path).
  void RecordUses(std::uint32_t position, const AllocId* ids, std::uint32_t n) {
    position_.store(position, std::memory_order_relaxed);
    history_.Record(position, ids, n);
  }
  /// While recording is paused (UseHistory::Skip): the op's position only, which the Belady
  /// rule still needs as "now".
  void NotePosition(std::uint32_t position) {
    position_.store(position, std::memory_order_relaxed);
  }
  /// An iteration boundary after `ops` ops: the recorded uses become the previous iteration's;
  /// with `recorded` false (paused) the last recorded iteration stays the one read.
  void CloseUseIteration(std::uint32_t ops, bool recorded = true);
  /// True when the eviction rule has a whole recorded iteration to read (UseHistory::known).
  bool UsesKnown() const;

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
  DriverApi api_;
  /// Whether a swap copy is still running on the out or in stream (probed with a fresh fence on
  /// each: cuEventQuery, no wait). Under mu_.
  bool CopiesInFlight();
  /// Pending unmaps beyond which a flush runs even with copies in flight (bounds the ranges,
  /// fences and VA kept for them).
  static constexpr std::size_t kMaxDeferredUnmaps = 16384;

  SwapEngineOptions options_;
  SwapCounters* counters_;
  std::size_t chunk_bytes_ = 0;
  CUstream side_ = nullptr;  // swap-ins (HtoD); chunk waits for them
  CUstream out_ = nullptr;   // swap-outs (DtoH)
  mutable std::mutex mu_;
  AllocationTable table_;
  UseHistory history_;                        // Record lock-free; the rest under mu_
  std::atomic<std::uint32_t> position_{0};    // the latest op position RecordUses saw
  std::atomic<std::uint64_t> lent_bytes_{0};  // SetLentBytes; read by the Evictor
  // The device limit in force (options_.device_limit_bytes until SetDeviceLimit changes it; the
  // one copy), readable without mu_: the client thread publishes it at every tick, and mu_ can be
  // held for seconds (an unmap waiting for the device to drain its queue); a heartbeat stuck
  // behind it made the daemon release a live client. Written under mu_.
  std::atomic<std::uint64_t> device_limit_;
  // Built by Init (they need the granularity and the streams), each after what it uses, and
  // torn down in reverse by ~SwapEngine once the device is idle.
  std::unique_ptr<FencePool> fences_;
  std::unique_ptr<ChunkPool> chunks_;
  std::unique_ptr<HostPool> host_;
  std::unique_ptr<Destinations> destinations_;
  std::unique_ptr<VaMapper> vmm_;
  std::unique_ptr<FreeRangeCache> free_ranges_;
  std::unique_ptr<UnmapBatcher> unmaps_;
  std::unique_ptr<TransferScheduler> transfers_;
  std::unique_ptr<LeaseSettler> leases_;
  std::unique_ptr<Evictor> evictor_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<HostMapper> host_maps_;
  std::unique_ptr<ResidencyManager> residency_;
  std::unique_ptr<AdoptedRanges> adopted_;
};

}  // namespace chameleon::shim::swap
