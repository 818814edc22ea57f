// FenceSweep: whether many fences have completed, with about one driver query per stream.
//
// Why: a batch of deferred unmaps checks the fence of every pending range and of every cached
// free range — after a step's swap-outs and frees, hundreds to a few thousand, one cuEventQuery
// each — right after the forced unmap that synchronised the device, while the compute stream
// waits for the host's next launch (GPT-2 XL B8 S1024 at 0.75 of its peak on h200-sxm: ~1,750
// queries in one batch a step, 1.7 ms of simgpu host time at 1 µs a call). Events on one stream
// complete in the order they were recorded, so once a fence is seen complete every fence
// recorded on its stream before it is complete too, and once one is seen pending every later
// one is pending too. Queried newest first (Prime), a stream's whole batch costs one query when
// it has drained. A stream's handle only goes back to the driver once its work has completed,
// so a reused handle cannot make an older fence look complete. The shared default-stream
// handles (null, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) name a different stream per context or
// per thread: their fences are always queried one by one.
//
// Not thread-safe; lives for one batch, under the engine's mutex (which orders FencePool's
// records).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "swap/chunk_pool.h"

namespace chameleon::shim::swap {

class FenceSweep {
 public:
  explicit FenceSweep(const FencePool* fences) : fences_(fences) {}

  /// True when `f` (null: nothing to wait for) has completed. Queries the driver only when what
  /// was seen of its stream does not answer.
  bool Done(const Fence* f);
  /// Queries the newest of `fences` on each stream, so that Done answers the others from it.
  void Prime(const std::vector<const Fence*>& fences);

  std::uint64_t queries() const { return queries_; }  ///< driver queries made (for tests)

 private:
  /// What is known of one stream: every fence up to `done_up_to` completed, every fence from
  /// `pending_from` on has not.
  struct Known {
    std::uint64_t done_up_to = 0;
    std::uint64_t pending_from = UINT64_MAX;
  };
  static bool Shared(CUstream stream);

  const FencePool* fences_;
  std::unordered_map<CUstream, Known> streams_;
  std::uint64_t queries_ = 0;
};

}  // namespace chameleon::shim::swap
