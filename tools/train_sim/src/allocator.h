// Device memory for the trainer, in the three ways PyTorch gets it from the driver:
//   tensor      - one cuMemAllocAsync / cuMemFreeAsync per tensor (backend:cudaMallocAsync);
//   caching     - a caching allocator carving 2 MB / 20 MB cuMemAlloc segments (the default);
//   expandable  - VMM: one reserved range per pool, 2 MB pages mapped on demand
//                 (expandable_segments:True).
// Whatever the style, the trainer's own accounting counts requested bytes, so `peak` is the same
// for all three.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <string>

#include "driver.h"

namespace chameleon::train_sim {

enum class AllocStyle { kTensor, kCaching, kExpandable };

/// Parses "tensor" / "caching" / "expandable"; false for anything else.
bool ParseAllocStyle(const std::string& text, AllocStyle* style);

/// A device buffer: the pointer the kernels see and the bytes the trainer asked for.
struct Tensor {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  explicit operator bool() const { return ptr != 0; }
};

/// Live and peak requested bytes summed over several allocators (one per device of a pipeline),
/// in the order the host issues allocations and frees. Not thread-safe.
struct LiveTotal {
  std::size_t live = 0;
  std::size_t peak = 0;
};

/// Base class: tracks live and peak requested bytes; subclasses talk to the driver. Every free is
/// stream-ordered on the trainer's single stream, so memory can be reused by later work on that
/// stream without a host wait. Not thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;

  /// Allocates `bytes` (> 0). Throws OutOfMemory / DriverError.
  Tensor Allocate(std::size_t bytes);
  /// Frees `tensor` (no-op when empty) and clears it.
  void Free(Tensor& tensor);

  std::size_t live_bytes() const { return live_; }
  std::size_t peak_bytes() const { return peak_; }
  /// Also counts this allocator's bytes into `total` (null: no sharing).
  void set_total(LiveTotal* total) { total_ = total; }

  /// Returns every segment / page to the driver. Call after the stream is synchronised and every
  /// tensor has been freed.
  virtual void ReleaseAll() = 0;

 protected:
  virtual CUdeviceptr DoAllocate(std::size_t bytes) = 0;
  virtual void DoFree(CUdeviceptr ptr, std::size_t bytes) = 0;

 private:
  std::size_t live_ = 0;
  std::size_t peak_ = 0;
  LiveTotal* total_ = nullptr;
};

namespace detail {
std::unique_ptr<Allocator> MakeTensorAllocator(const DriverApi& api, CUstream stream);
std::unique_ptr<Allocator> MakeCachingAllocator(const DriverApi& api);
std::unique_ptr<Allocator> MakeExpandableAllocator(const DriverApi& api, CUdevice device);
}  // namespace detail

/// The allocator for `style`; `stream` is the stream every tensor is used on.
std::unique_ptr<Allocator> MakeAllocator(AllocStyle style, const DriverApi& api, CUdevice device,
                                         CUstream stream);

}  // namespace chameleon::train_sim
