// Launches the model-shaped trainer's sampled kernel (sampled_kernel.h) on one stream.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>

#include "allocator.h"
#include "driver.h"

namespace chameleon::train_sim {

/// What one launch stands for: the tensors it reads and writes and the cost of the real kernel.
struct SampledOp {
  std::uint32_t tag = 0;       ///< identifies the op (same op in a recompute: same tag)
  std::array<Tensor, 5> in{};  ///< empty slots are skipped
  std::array<Tensor, 4> out{};
  double flops = 0;
  double bytes = 0;       ///< HBM bytes
  double link_bytes = 0;  ///< bytes over the GPU-to-GPU link (tensor-parallel collectives)
};

/// Owns the loaded sampled-kernel module; launches ops and hashes the sequence of op tags since
/// the last TakeSequenceHash() (`shift at step N`). Not thread-safe.
class SampledLauncher {
 public:
  SampledLauncher(const DriverApi& api, CUstream stream);
  ~SampledLauncher();
  SampledLauncher(const SampledLauncher&) = delete;
  SampledLauncher& operator=(const SampledLauncher&) = delete;

  /// Launches `op` for step `step` (-1: initialisation). Throws DriverError.
  void Launch(const SampledOp& op, std::int32_t step);

  std::uint64_t TakeSequenceHash();

 private:
  const DriverApi& api_;
  CUstream stream_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  std::uint64_t sequence_hash_;
};

}  // namespace chameleon::train_sim
