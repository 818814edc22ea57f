// --pointer-table: one gather per step through a device-side table of weight addresses, with
// simgpu's pointer-table kernel (chameleon/simgpu/pointer_table_kernel.h). The launch names only
// the table and the output, never the weights behind them — the access pattern an interposer
// cannot see (docs/executor.md, "Pointer tables") — so an end-to-end run under a swapping shim
// exercises the executor's pointer-table detection: the gathered bytes are folded into the
// `checksum` line, which then differs if the gather ever read a swapped-out weight's stale chunk.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "allocator.h"
#include "driver.h"
#include "model.h"

namespace chameleon::train_sim {

/// Owns the table, the output and the kernel's module. Not thread-safe.
class PointerTableGather {
 public:
  /// Writes the table (one entry per weight) with a synchronous copy. Throws DriverError /
  /// OutOfMemory.
  PointerTableGather(const DriverApi& api, Allocator& alloc, CUstream stream,
                     const std::vector<Param>& params);
  ~PointerTableGather();
  PointerTableGather(const PointerTableGather&) = delete;
  PointerTableGather& operator=(const PointerTableGather&) = delete;

  /// Queues the gather of the first bytes of every weight and the copy of the result to the
  /// host on the stream.
  void Launch();
  /// After the stream has passed Launch's work: folds the gathered bytes into hash().
  void Fold();
  /// FNV-1a over everything gathered so far.
  std::uint64_t hash() const { return hash_; }
  /// Frees the table and output (stream-ordered) and unloads the module.
  void Release();

 private:
  const DriverApi& api_;
  Allocator& alloc_;
  CUstream stream_;
  CUmodule module_ = nullptr;
  CUfunction gather_ = nullptr;
  Tensor table_;
  Tensor out_;
  std::uint64_t entries_ = 0;
  std::uint64_t entry_bytes_ = 0;
  std::vector<unsigned char> host_;
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace chameleon::train_sim
