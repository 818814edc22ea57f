// The caching style: PyTorch's default allocator. Segments come from cuMemAlloc_v2 (2 MiB for
// small requests, 20 MiB or the exact 2 MiB-rounded size for large ones) and are carved into
// blocks; freed blocks go back to the pool and segments are never returned until exit, so the
// driver sees a few large allocations rather than the tensors themselves.
#include <string>
#include <unordered_map>
#include <vector>

#include "allocator.h"
#include "block_pool.h"
#include "size_classes.h"

namespace chameleon::train_sim {
namespace {

namespace sc = size_classes;

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(const DriverApi& api) : api_(api) {}

  void ReleaseAll() override {
    for (CUdeviceptr segment : segments_) api_.cuMemFree(segment);
    segments_.clear();
  }

 protected:
  CUdeviceptr DoAllocate(std::size_t bytes) override {
    const std::size_t rounded = sc::RoundRequest(bytes);
    const bool small = sc::IsSmall(rounded);
    BlockPool& pool = small ? small_ : large_;
    if (auto addr = pool.Take(rounded, sc::MinSplit(small))) return Remember(*addr, small);
    const std::size_t segment_bytes = sc::SegmentBytes(rounded);
    CUdeviceptr segment = 0;
    const CUresult result = api_.cuMemAlloc(&segment, segment_bytes);
    if (result != CUDA_SUCCESS) {
      Check(api_, result,
            "cuMemAlloc_v2 of a " + std::to_string(segment_bytes) + "-byte segment for " +
                std::to_string(bytes) + " bytes");
    }
    pool.AddFree(segment, segment_bytes, static_cast<std::uint32_t>(segments_.size()));
    segments_.push_back(segment);
    return Remember(*pool.Take(rounded, sc::MinSplit(small)), small);
  }

  void DoFree(CUdeviceptr ptr, std::size_t) override {
    auto it = small_of_.find(ptr);
    // Memory is reused by later work on the same stream only, so no event is needed.
    if (it == small_of_.end() || !(it->second ? small_ : large_).Release(ptr)) {
      throw DriverError(CUDA_ERROR_INVALID_VALUE, "caching allocator: free of an unknown block");
    }
    small_of_.erase(it);
  }

 private:
  CUdeviceptr Remember(CUdeviceptr addr, bool small) {
    small_of_[addr] = small;
    return addr;
  }

  const DriverApi& api_;
  BlockPool small_;
  BlockPool large_;
  std::unordered_map<CUdeviceptr, bool> small_of_;  // live block -> which pool it came from
  std::vector<CUdeviceptr> segments_;
};

}  // namespace

namespace detail {
std::unique_ptr<Allocator> MakeCachingAllocator(const DriverApi& api) {
  return std::make_unique<CachingAllocator>(api);
}
}  // namespace detail

}  // namespace chameleon::train_sim
