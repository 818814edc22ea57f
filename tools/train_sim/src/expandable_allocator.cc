// The expandable style: PyTorch's expandable_segments:True. Each pool (small, large) reserves one
// virtual range as large as the device and maps 2 MiB physical pages at its end as it grows
// (cuMemCreate + cuMemMap + cuMemSetAccess per page); blocks are carved from the mapped part with
// the same size classes as the caching style. Pages are kept until exit.
#include <string>
#include <unordered_map>
#include <vector>

#include "allocator.h"
#include "block_pool.h"
#include "size_classes.h"

namespace chameleon::train_sim {
namespace {

namespace sc = size_classes;

struct ExpandableSegment {
  std::uint32_t id = 0;
  CUdeviceptr base = 0;
  std::size_t reserved = 0;
  std::size_t mapped = 0;
  std::vector<CUmemGenericAllocationHandle> pages;
  BlockPool pool;
};

class ExpandableAllocator final : public Allocator {
 public:
  ExpandableAllocator(const DriverApi& api, CUdevice device) : api_(api), device_(device) {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device;
    small_.id = 0;
    large_.id = 1;
  }

  void ReleaseAll() override {
    for (ExpandableSegment* segment : {&small_, &large_}) {
      for (std::size_t i = 0; i < segment->pages.size(); ++i) {
        api_.cuMemUnmap(segment->base + i * page_bytes_, page_bytes_);
        api_.cuMemRelease(segment->pages[i]);
      }
      if (segment->base != 0) api_.cuMemAddressFree(segment->base, segment->reserved);
      segment->pages.clear();
      segment->base = 0;
    }
  }

 protected:
  CUdeviceptr DoAllocate(std::size_t bytes) override {
    const std::size_t rounded = sc::RoundRequest(bytes);
    const bool small = sc::IsSmall(rounded);
    ExpandableSegment& segment = small ? small_ : large_;
    auto addr = segment.pool.Take(rounded, sc::MinSplit(small));
    if (!addr) {
      Grow(segment, rounded, bytes);
      addr = segment.pool.Take(rounded, sc::MinSplit(small));
    }
    small_of_[*addr] = small;
    return *addr;
  }

  void DoFree(CUdeviceptr ptr, std::size_t) override {
    auto it = small_of_.find(ptr);
    if (it == small_of_.end() || !(it->second ? small_ : large_).pool.Release(ptr)) {
      throw DriverError(CUDA_ERROR_INVALID_VALUE, "expandable allocator: free of an unknown block");
    }
    small_of_.erase(it);
  }

 private:
  void Reserve(ExpandableSegment& segment) {
    if (page_bytes_ == 0) {
      std::size_t granularity = 0;
      Check(api_,
            api_.cuMemGetAllocationGranularity(&granularity, &prop_,
                                               CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity");
      page_bytes_ = sc::RoundUp(sc::kSmallSegment, granularity == 0 ? 1 : granularity);
    }
    std::size_t total = 0;
    Check(api_, api_.cuDeviceTotalMem(&total, device_), "cuDeviceTotalMem");
    segment.reserved = sc::RoundUp(total, page_bytes_);
    Check(api_, api_.cuMemAddressReserve(&segment.base, segment.reserved, 0, 0, 0),
          "cuMemAddressReserve of " + std::to_string(segment.reserved) + " bytes");
  }

  // Maps enough pages at the end of `segment` for a `rounded` block, counting a free block that
  // already ends there.
  void Grow(ExpandableSegment& segment, std::size_t rounded, std::size_t requested) {
    if (segment.base == 0) Reserve(segment);
    const CUdeviceptr end = segment.base + segment.mapped;
    const std::size_t tail = segment.pool.FreeTailBytes(end, segment.id);
    const std::size_t pages = (rounded - tail + page_bytes_ - 1) / page_bytes_;
    if (segment.mapped + pages * page_bytes_ > segment.reserved) {
      throw OutOfMemory(CUDA_ERROR_OUT_OF_MEMORY, "expandable segment reservation exhausted for " +
                                                      std::to_string(requested) + " bytes");
    }
    for (std::size_t i = 0; i < pages; ++i) MapPage(segment, requested);
  }

  void MapPage(ExpandableSegment& segment, std::size_t requested) {
    const CUdeviceptr at = segment.base + segment.mapped;
    CUmemGenericAllocationHandle handle = 0;
    CUresult result = api_.cuMemCreate(&handle, page_bytes_, &prop_, 0);
    if (result != CUDA_SUCCESS) {
      Check(api_, result,
            "cuMemCreate of a " + std::to_string(page_bytes_) + "-byte page for " +
                std::to_string(requested) + " bytes");
    }
    result = api_.cuMemMap(at, page_bytes_, 0, handle, 0);
    if (result != CUDA_SUCCESS) {
      api_.cuMemRelease(handle);
      Check(api_, result, "cuMemMap");
    }
    segment.pages.push_back(handle);
    segment.mapped += page_bytes_;
    CUmemAccessDesc access{};
    access.location = prop_.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    Check(api_, api_.cuMemSetAccess(at, page_bytes_, &access, 1), "cuMemSetAccess");
    segment.pool.AddFree(at, page_bytes_, segment.id);
  }

  const DriverApi& api_;
  CUdevice device_;
  CUmemAllocationProp prop_{};
  std::size_t page_bytes_ = 0;
  ExpandableSegment small_;
  ExpandableSegment large_;
  std::unordered_map<CUdeviceptr, bool> small_of_;
};

}  // namespace

namespace detail {
std::unique_ptr<Allocator> MakeExpandableAllocator(const DriverApi& api, CUdevice device) {
  return std::make_unique<ExpandableAllocator>(api, device);
}
}  // namespace detail

}  // namespace chameleon::train_sim
