#include "allocator.h"

#include <map>
#include <set>
#include <vector>

namespace chameleon::replay {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

class TensorAllocator final : public Allocator {
 public:
  TensorAllocator(const DriverApi& api, CUstream stream) : api_(api), stream_(stream) {}
  void ReleaseAll() override {}

 private:
  CUdeviceptr DoAllocate(std::uint64_t bytes) override {
    CUdeviceptr p = 0;
    Check(api_, api_.cuMemAllocAsync(&p, bytes, stream_),
          "cuMemAllocAsync(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void DoFree(CUdeviceptr ptr, std::uint64_t) override {
    Check(api_, api_.cuMemFreeAsync(ptr, stream_), "cuMemFreeAsync");
  }

  const DriverApi& api_;
  CUstream stream_;
};

// Blocks are kept by address (to merge neighbours) and free blocks by (size, address) per pool
// (best fit). A block never crosses its segment, as in PyTorch.
class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(const DriverApi& api) : api_(api) {}
  ~CachingAllocator() override {
    for (auto& [base, size] : segments_) api_.cuMemFree(base);
  }

  void ReleaseAll() override {
    for (auto it = segments_.begin(); it != segments_.end();) {
      auto b = blocks_.find(it->first);
      if (b != blocks_.end() && b->second.free && b->second.size == it->second) {
        free_[b->second.large].erase({b->second.size, b->first});
        blocks_.erase(b);
        Check(api_, api_.cuMemFree(it->first), "cuMemFree");
        it = segments_.erase(it);
      } else {
        ++it;
      }
    }
  }

 private:
  struct Block {
    std::uint64_t size;
    CUdeviceptr segment;
    bool large;
    bool free;
  };

  static std::uint64_t Round(std::uint64_t bytes) { return (bytes + 511) / 512 * 512; }

  CUdeviceptr DoAllocate(std::uint64_t bytes) override {
    const std::uint64_t size = Round(bytes);
    const bool large = size > kMiB;
    auto fit = free_[large].lower_bound({size, 0});
    if (fit == free_[large].end()) {
      NewSegment(size, large);
      fit = free_[large].lower_bound({size, 0});
    }
    const CUdeviceptr addr = fit->second;
    free_[large].erase(fit);
    Block& b = blocks_.at(addr);
    if (b.size - size >= 512) {  // split off the tail
      blocks_[addr + size] = Block{b.size - size, b.segment, large, true};
      free_[large].insert({b.size - size, addr + size});
      b.size = size;
    }
    b.free = false;
    return addr;
  }

  void DoFree(CUdeviceptr ptr, std::uint64_t) override {
    auto it = blocks_.find(ptr);
    it->second.free = true;
    auto next = std::next(it);
    if (next != blocks_.end() && next->second.free && next->second.segment == it->second.segment) {
      free_[next->second.large].erase({next->second.size, next->first});
      it->second.size += next->second.size;
      blocks_.erase(next);
    }
    if (it != blocks_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.free && prev->second.segment == it->second.segment) {
        free_[prev->second.large].erase({prev->second.size, prev->first});
        prev->second.size += it->second.size;
        blocks_.erase(it);
        it = prev;
      }
    }
    free_[it->second.large].insert({it->second.size, it->first});
  }

  void NewSegment(std::uint64_t size, bool large) {
    const std::uint64_t seg = !large              ? 2 * kMiB
                              : size <= 10 * kMiB ? 20 * kMiB
                                                  : (size + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
    CUdeviceptr base = 0;
    CUresult r = api_.cuMemAlloc(&base, seg);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {  // like PyTorch: give cached segments back, retry once
      ReleaseAll();
      r = api_.cuMemAlloc(&base, seg);
    }
    Check(api_, r, "cuMemAlloc(" + std::to_string(seg) + " byte segment)");
    segments_[base] = seg;
    blocks_[base] = Block{seg, base, large, true};
    free_[large].insert({seg, base});
  }

  const DriverApi& api_;
  std::map<CUdeviceptr, std::uint64_t> segments_;
  std::map<CUdeviceptr, Block> blocks_;
  std::set<std::pair<std::uint64_t, CUdeviceptr>> free_[2];
};

}  // namespace

// The driver is asked for whole 8-byte words (the kernels' sample unit); accounting keeps the
// requested size so the peak matches the trace's.
std::uint64_t Words8(std::uint64_t bytes) { return bytes < 8 ? 8 : (bytes + 7) / 8 * 8; }

CUdeviceptr Allocator::Allocate(std::uint64_t bytes) {
  const CUdeviceptr p = DoAllocate(Words8(bytes));
  live_ += bytes;
  if (live_ > peak_) peak_ = live_;
  return p;
}

void Allocator::Free(CUdeviceptr ptr, std::uint64_t bytes) {
  DoFree(ptr, Words8(bytes));
  live_ -= bytes;
}

std::unique_ptr<Allocator> MakeAllocator(AllocStyle style, const DriverApi& api, CUstream stream) {
  if (style == AllocStyle::kCaching) return std::make_unique<CachingAllocator>(api);
  return std::make_unique<TensorAllocator>(api, stream);
}

}  // namespace chameleon::replay
