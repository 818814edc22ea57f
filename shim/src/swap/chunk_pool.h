// Physical device memory for VA-stable allocations: fixed-size chunks from cuMemCreate, pooled
// and reused under event ordering, with a cap on physical bytes.
//
// Why fixed-size chunks (default = the VMM granularity, 2 MiB): any released chunk fits any later
// allocation or swap-in, so a stable working set reaches a steady state with zero cuMemCreate /
// cuMemRelease whatever the mix of tensor sizes (whole-allocation chunks would only be reusable
// by tensors of the same rounded size, and fragment). The price is one cuMemMap per chunk on
// map; a bigger chunk size (options) trades that against rounding waste.
//
// Event ordering. A chunk enters the pool with a Fence: an event recorded on the stream of the
// last work that used it (the swap-out copy, or the stream of a stream-ordered free). Whoever
// takes it makes its own stream wait on that fence (cuStreamWaitEvent) before any write: the
// host never polls. Fences are refcounted (one event can cover many chunks) and recycled.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "swap/counters.h"
#include "swap/driver_api.h"

namespace chameleon::shim::swap {

/// A recorded event shared by the chunks (or the allocation) whose reuse must wait for it.
struct Fence {
  CUevent event = nullptr;
  std::uint32_t refs = 0;
  CUstream stream = nullptr;  ///< where it was last recorded
  std::uint64_t seq = 0;      ///< FencePool's record order: on one stream, completion order
};

/// Creates and recycles Fences. Not thread-safe.
class FencePool {
 public:
  FencePool(const DriverApi* api) : api_(api) {}
  ~FencePool();
  FencePool(const FencePool&) = delete;
  FencePool& operator=(const FencePool&) = delete;

  /// A fence recorded on `stream` now, with one reference. Null if the driver refused.
  Fence* Record(CUstream stream);
  static void Ref(Fence* f) { ++f->refs; }
  void Unref(Fence* f);
  /// True when the fence's work has completed (cuEventQuery == CUDA_SUCCESS).
  bool Done(const Fence* f) const;

 private:
  const DriverApi* api_;
  std::vector<Fence*> all_;
  std::vector<Fence*> free_;
  std::uint64_t next_seq_ = 0;
};

class ChunkPool {
 public:
  /// `external_bytes` (may be null): device bytes used outside the pool, counted against the
  /// limit too.
  ChunkPool(const DriverApi* api, FencePool* fences, SwapCounters* counters, int device,
            std::size_t chunk_bytes, std::uint64_t limit_bytes,
            const std::atomic<std::uint64_t>* external_bytes = nullptr);
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::uint64_t limit_bytes() const { return limit_bytes_; }
  std::uint64_t created_bytes() const { return created_bytes_; }
  void set_limit_bytes(std::uint64_t bytes) { limit_bytes_ = bytes; }
  /// Bytes that may still be created: limit - created - external (0 when over).
  std::uint64_t room_bytes() const;
  std::size_t pooled() const { return pooled_; }

  /// Takes `n` chunks, all or nothing: pooled ones first, oldest release first (FIFO), then new
  /// ones while the limit allows. FIFO because the oldest fences are the likeliest to have
  /// completed (the taker's wait costs nothing), and the chunks a swapped-out tensor released
  /// most recently stay intact longest, so its swap-in can still reclaim them (no copy, and no
  /// unmap of its stale range, which would synchronise the device). `wait_stream` is made to wait
  /// on the fences of reused chunks. CUDA_ERROR_OUT_OF_MEMORY when the limit (or the driver)
  /// refuses: the caller evicts and retries.
  /// With `fences` (not null), nothing waits: each taken chunk's fence (or null) is appended,
  /// with its reference, in `out`'s order — the caller waits per chunk, so that a copy into the
  /// first chunks can start while a swap-out still empties the last ones.
  CUresult Take(std::uint32_t n, CUstream wait_stream, std::vector<std::uint32_t>* out,
                std::vector<Fence*>* fences = nullptr);
  /// Returns chunks to the pool, reusable once `fence` completes (a reference per chunk is
  /// taken). `epochs` receives each chunk's epoch, for Reclaim.
  void Release(const std::vector<std::uint32_t>& chunks, Fence* fence,
               std::vector<std::uint64_t>* epochs);
  /// Release of one chunk (a reference to `fence` is taken); returns its epoch, for Reclaim.
  std::uint64_t ReleaseOne(std::uint32_t chunk, Fence* fence);
  /// Takes back exactly these chunks if none was reused since Release (epochs unchanged): their
  /// contents are then intact. All or nothing.
  bool Reclaim(const std::vector<std::uint32_t>& chunks, const std::vector<std::uint64_t>& epochs);
  /// True when Reclaim would succeed (all pooled, none reused since Release).
  bool Intact(const std::vector<std::uint32_t>& chunks,
              const std::vector<std::uint64_t>& epochs) const;
  CUmemGenericAllocationHandle handle(std::uint32_t chunk) const { return chunks_[chunk].handle; }
  /// True when the chunk may hold a previous owner's bytes: released since it was created or
  /// last discarded (Discarder drops them before a new owner uses it).
  bool stale(std::uint32_t chunk) const { return chunks_[chunk].stale; }
  void set_discarded(std::uint32_t chunk) { chunks_[chunk].stale = false; }
  /// Releases (cuMemRelease) pooled chunks whose fence has completed. Returns bytes released.
  std::uint64_t Trim();
  /// Releases idle pooled chunks that no VA maps any more, oldest release first, until at least
  /// `want` bytes went (or none is left). Their memory returns to the driver at once, with no
  /// unmap: a cuMemRelease'd chunk keeps its memory while a stale range still maps it, and
  /// unmapping one synchronises the device. Returns bytes released.
  std::uint64_t TrimUnmapped(std::uint64_t want);
  /// VA mappings of a chunk (VaMapper keeps them): a pooled chunk with none holds no stale range.
  /// `handle` names the chunk's incarnation: a range mapping a chunk that was released (and whose
  /// id serves a new chunk) drops nothing.
  void AddMapping(std::uint32_t chunk) { ++chunks_[chunk].mappings; }
  void DropMapping(std::uint32_t chunk, CUmemGenericAllocationHandle handle) {
    Chunk& c = chunks_[chunk];
    if (c.handle == handle && c.mappings > 0) --c.mappings;
  }
  std::uint32_t mappings(std::uint32_t chunk) const { return chunks_[chunk].mappings; }

 private:
  struct Chunk {
    CUmemGenericAllocationHandle handle = 0;
    Fence* fence = nullptr;      // while pooled: wait on this before writing
    std::uint64_t epoch = 0;     // bumped on every Take
    std::uint64_t pool_seq = 0;  // release sequence number while pooled, 0 when in use
    bool stale = false;          // released since created or discarded: may hold old bytes
    std::uint32_t mappings = 0;  // VA ranges mapping it (its owner's, and stale ones)
  };
  /// An entry of the FIFO; stale (skipped) once the chunk left the pool or was released again.
  struct Entry {
    std::uint32_t chunk = 0;
    std::uint64_t seq = 0;
  };
  bool Live(const Entry& e) const { return chunks_[e.chunk].pool_seq == e.seq; }
  void AddToPool(std::uint32_t chunk, bool front);
  // Makes `stream` wait for `fence` and counts the virtual time it then waits (alloc_wait_ns):
  // the chunk's last user, usually a swap-out copy, was still running. simgpu's clocks only.
  void WaitFor(CUstream stream, const Fence* fence);
  void RemoveFromPool(std::uint32_t chunk);
  /// cuMemRelease of a pooled chunk whose fence has completed.
  void ReleaseToDriver(std::uint32_t chunk);
  /// Drops stale entries once they outnumber the live ones.
  void MaybeCompact();
  bool CreateChunk(std::uint32_t* chunk);

  const DriverApi* api_;
  FencePool* fences_;
  SwapCounters* counters_;
  int device_;
  std::size_t chunk_bytes_;
  std::uint64_t limit_bytes_;
  const std::atomic<std::uint64_t>* external_bytes_;
  std::uint64_t created_bytes_ = 0;
  std::vector<Chunk> chunks_;  // every chunk ever created (index = id)
  std::deque<Entry> pool_;     // free chunks in release order, with stale entries (lazy removal)
  std::size_t pooled_ = 0;     // live entries
  std::uint64_t next_seq_ = 0;
  std::vector<std::uint32_t> dead_;  // ids of released chunks, for reuse of the slot
};

}  // namespace chameleon::shim::swap
