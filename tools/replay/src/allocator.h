// Device memory for the replayer, the two ways PyTorch gets it from the driver:
//   tensor  - one cuMemAllocAsync / cuMemFreeAsync per storage (backend:cudaMallocAsync);
//   caching - blocks carved from cuMemAlloc segments (2 MiB for requests <= 1 MiB, 20 MiB up to
//             10 MiB, exact 2 MiB multiples above), best fit, neighbours merged on free, cached
//             segments released and the request retried on out-of-memory (PyTorch's default).
// Both count requested bytes, so `peak` is the same for both. Single stream; not thread-safe.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>

#include "driver.h"

namespace chameleon::replay {

enum class AllocStyle { kTensor, kCaching };

class Allocator {
 public:
  virtual ~Allocator() = default;

  /// Allocates `bytes` (> 0). Throws OutOfMemory / DriverError.
  CUdeviceptr Allocate(std::uint64_t bytes);
  /// Frees a pointer from Allocate with the same `bytes`, ordered on the replay stream.
  void Free(CUdeviceptr ptr, std::uint64_t bytes);

  std::uint64_t live_bytes() const { return live_; }
  std::uint64_t peak_bytes() const { return peak_; }

  /// Returns cached memory to the driver (after the stream is synchronised).
  virtual void ReleaseAll() = 0;

 protected:
  virtual CUdeviceptr DoAllocate(std::uint64_t bytes) = 0;
  virtual void DoFree(CUdeviceptr ptr, std::uint64_t bytes) = 0;

 private:
  std::uint64_t live_ = 0;
  std::uint64_t peak_ = 0;
};

std::unique_ptr<Allocator> MakeAllocator(AllocStyle style, const DriverApi& api, CUstream stream);

}  // namespace chameleon::replay
