// Discarder: drops the dead contents of a chunk or a swap buffer before its next owner uses it,
// through simgpu's simgpuMemDiscardAsync (DriverApi::mem_discard_async).
//
// Why: on simgpu's sparse memory (docs/simgpu.md) a reused chunk keeps its previous owner's
// written pages. The new tensor writes only some of them, so the stale rest costs host RAM and
// is copied again by every later swap of the new tensor. A discard turns it back into holes. It
// is stream-ordered and costs no virtual time and no host-clock tick, so virtual times are those
// of a run without it; on a real driver the symbol is absent and nothing happens.
//
// Only dead bytes are discarded: a chunk handed to a NEW allocation or to a swap-in (after its
// previous users' fences, on the stream that will write it), and a host buffer once its swap-in
// has read it. Never a chunk an intact reclaim could still take back (those are not handed out).
//
// Not thread-safe: owned by SwapEngine's parts, used under its mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "swap/swap_base.h"

namespace chameleon::shim::swap {

class Discarder {
 public:
  explicit Discarder(const SwapBase& base) : base_(base) {}

  /// Discards the stale chunks among chunks[first, first + count), mapped consecutively from
  /// `va` (chunks[i] at va + i * chunk_bytes), on `stream`; one call per run of stale chunks.
  /// Does nothing on the legacy stream (null): a discard there would serialise the device's
  /// blocking streams, which the allocation itself does not.
  void StaleChunks(CUdeviceptr va, const std::vector<std::uint32_t>& chunks, std::size_t first,
                   std::size_t count, CUstream stream) const;
  /// Marks chunks[first, first + count) as holding no stale bytes without discarding them: a
  /// swap-in copy about to be issued writes each of them whole, and on simgpu a copy already
  /// turns the destination bytes opposite its source's holes into holes (docs/simgpu.md), so a
  /// discard first would only punch and zap the same range twice.
  void Overwritten(const std::vector<std::uint32_t>& chunks, std::size_t first,
                   std::size_t count) const;
  /// Discards [ptr, ptr + bytes) (a swap buffer whose copy is no longer needed) on `stream`.
  void Buffer(const void* ptr, std::size_t bytes, CUstream stream) const;

 private:
  bool Discard(CUdeviceptr ptr, std::size_t bytes, CUstream stream) const;

  SwapBase base_;
};

}  // namespace chameleon::shim::swap
