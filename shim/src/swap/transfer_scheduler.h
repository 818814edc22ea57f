// TransferScheduler: the swap copies — device to destination (swap-out) on the out stream and
// back (swap-in) on the in stream, in pieces, ordered by fences only — and the destination
// buffers that hold swapped-out contents.
//
// The host link is full duplex: swap-outs and swap-ins run on two side streams, one per
// direction, and wait on each other only through events:
//   swap-out: out waits on fence(compute) [and on the buffer's last read, and on an unfinished
//             swap-in of the same tensor] -> copy piece by piece, each piece's chunks released
//             to the pool with its own fence -> out_done; the VA's unmap is deferred.
//   swap-in:  in waits on out_done (the copy is complete) and, per piece, on the fences of the
//             chunks it fills -> copy -> ready; the buffer goes back carrying `ready`.
// Pieces (4 MiB) let a swap-in filling chunks that another tensor's swap-out is still emptying
// overlap with it.
//
// Destinations. A swap-out asks Destinations for a buffer at the placement the policy's entry
// names (a peer GPU under a lease, a host NUMA node), which falls back to local host memory; the
// Allocation remembers where (`where`, beside `host`), and one piece is copied each way by
// CopyOutPiece / CopyInPiece: device to host and back, or device to device for a peer's or a NUMA
// node's VMM buffer. MoveToHost moves a copy from a peer back to host memory on the out stream
// (a revoked lease). Only this class acquires and releases destination buffers (HostMapper, which
// maps host memory for the program VMM, reads and writes a host copy in place, after
// MoveToHost).
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "swap/allocation_table.h"
#include "swap/destinations.h"
#include "swap/discarder.h"
#include "swap/swap_base.h"
#include "swap/unmap_batcher.h"

namespace chameleon::shim::swap {

class TransferScheduler {
 public:
  /// `in` and `out`: the two side streams (non-blocking, owned by the caller).
  TransferScheduler(const SwapBase& base, CUstream in, CUstream out, Destinations* destinations,
                    UnmapBatcher* unmaps)
      : base_(base),
        in_(in),
        out_(out),
        destinations_(destinations),
        unmaps_(unmaps),
        discard_(base) {}

  CUstream in_stream() const { return in_; }    ///< swap-ins (host -> device)
  CUstream out_stream() const { return out_; }  ///< swap-outs (device -> host)
  /// Chunks per copy piece (at least one).
  std::size_t PieceChunks() const;

  /// Starts the swap-out of resident `a` after the work queued so far on `compute` (its last
  /// use): acquires a destination buffer, copies piece by piece, releases the chunks, defers the
  /// unmap. No-op when not resident; CUDA_ERROR_NOT_PERMITTED when pinned; OUT_OF_MEMORY when
  /// the destination is full (counted in host_pool_full). On failure nothing changed. `want`:
  /// where the copy should go (Destinations may put it in host memory instead).
  CUresult SwapOut(Allocation* a, CUstream compute, Placement want = {});
  /// Moves swapped-out `a`'s copy from a peer GPU or NUMA node to host memory, stream-ordered
  /// (out stream, after the copy that filled it; `a->out_done` becomes the move's end, so a
  /// swap-in waits for it). No-op when the copy is in host memory already. OUT_OF_MEMORY when
  /// the host pool is full (nothing changed).
  CUresult MoveToHost(Allocation* a);
  /// The swap-in copy of swapped-out `a` into its freshly mapped `a->chunks`; `waits` are their
  /// pool fences, in order (references consumed). `a` becomes resident with `ready` set.
  CUresult SwapIn(Allocation* a, const std::vector<Fence*>& waits);
  /// `a` is resident again on its old, intact chunks (a reclaim): drops its copy, no transfer.
  void FinishReclaim(Allocation* a);
  /// Gives `a`'s copy (if any) back to its destination; `busy`: work that may still use it.
  void ReleaseCopy(Allocation* a, Fence* busy = nullptr);
  /// Makes both side streams' work so far complete (a host wait).
  void SyncStreams();

 private:
  /// One piece each way; `remote`: the other end is a VMM buffer (a device-to-device copy).
  CUresult CopyOutPiece(void* dst, CUdeviceptr src, std::size_t n, bool remote);
  CUresult CopyInPiece(CUdeviceptr dst, const void* src, std::size_t n, bool remote);
  /// The swap-out copy of `a` into `host` (at `where`), piece by piece; releases each piece's
  /// chunks with its fence. Returns the last fence (its Record reference), or null (then nothing
  /// changed).
  Fence* CopyOut(Allocation* a, void* host, Placement where, CUresult* result);
  /// The swap-in copy into `a`'s (mapped) chunks; `waits` are their pool fences, in order.
  CUresult CopyIn(Allocation* a, const std::vector<Fence*>& waits);

  SwapBase base_;
  CUstream in_;
  CUstream out_;
  Destinations* destinations_;
  UnmapBatcher* unmaps_;
  Discarder discard_;
};

}  // namespace chameleon::shim::swap
