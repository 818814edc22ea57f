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
// Destinations. Today every swapped byte goes to one HostPool (pinned host memory, any NUMA
// node). The next destinations — pinned host memory on a given NUMA node, chunks on a peer GPU
// over NVLink — belong here: the destination is chosen in SwapOut (today `destination_`),
// remembered in the Allocation beside `host`, and the copy of one piece each way is
// CopyOutPiece / CopyInPiece (a peer GPU would use a device-to-device copy there). Only this
// class acquires and releases destination buffers (HostMapper, which maps host memory for the
// program VMM, reads and writes a host copy in place).
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "swap/allocation_table.h"
#include "swap/host_pool.h"
#include "swap/swap_base.h"
#include "swap/unmap_batcher.h"

namespace chameleon::shim::swap {

class TransferScheduler {
 public:
  /// `in` and `out`: the two side streams (non-blocking, owned by the caller).
  TransferScheduler(const SwapBase& base, CUstream in, CUstream out, HostPool* destination,
                    UnmapBatcher* unmaps)
      : base_(base), in_(in), out_(out), destination_(destination), unmaps_(unmaps) {}

  CUstream in_stream() const { return in_; }    ///< swap-ins (host -> device)
  CUstream out_stream() const { return out_; }  ///< swap-outs (device -> host)
  /// Chunks per copy piece (at least one).
  std::size_t PieceChunks() const;

  /// Starts the swap-out of resident `a` after the work queued so far on `compute` (its last
  /// use): acquires a destination buffer, copies piece by piece, releases the chunks, defers the
  /// unmap. No-op when not resident; CUDA_ERROR_NOT_PERMITTED when pinned; OUT_OF_MEMORY when
  /// the destination is full (counted in host_pool_full). On failure nothing changed.
  CUresult SwapOut(Allocation* a, CUstream compute);
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
  CUresult CopyOutPiece(void* dst, CUdeviceptr src, std::size_t n);
  CUresult CopyInPiece(CUdeviceptr dst, const void* src, std::size_t n);
  /// The swap-out copy of `a` into `host`, piece by piece; releases each piece's chunks with
  /// its fence. Returns the last fence (its Record reference), or null (then nothing changed).
  Fence* CopyOut(Allocation* a, void* host, CUresult* result);
  /// The swap-in copy into `a`'s (mapped) chunks; `waits` are their pool fences, in order.
  CUresult CopyIn(Allocation* a, const std::vector<Fence*>& waits);

  SwapBase base_;
  CUstream in_;
  CUstream out_;
  HostPool* destination_;
  UnmapBatcher* unmaps_;
};

}  // namespace chameleon::shim::swap
