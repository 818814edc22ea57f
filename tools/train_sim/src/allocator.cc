// Allocator accounting and the per-tensor style (PyTorch's backend:cudaMallocAsync).
#include "allocator.h"

#include <string>

namespace chameleon::train_sim {

bool ParseAllocStyle(const std::string& text, AllocStyle* style) {
  if (text == "tensor") {
    *style = AllocStyle::kTensor;
  } else if (text == "caching") {
    *style = AllocStyle::kCaching;
  } else if (text == "expandable") {
    *style = AllocStyle::kExpandable;
  } else {
    return false;
  }
  return true;
}

Tensor Allocator::Allocate(std::size_t bytes) {
  Tensor tensor{DoAllocate(bytes), bytes};
  live_ += bytes;
  if (live_ > peak_) peak_ = live_;
  if (total_ != nullptr) {
    total_->live += bytes;
    if (total_->live > total_->peak) total_->peak = total_->live;
  }
  return tensor;
}

void Allocator::Free(Tensor& tensor) {
  if (!tensor) return;
  DoFree(tensor.ptr, tensor.bytes);
  live_ -= tensor.bytes;
  if (total_ != nullptr) total_->live -= tensor.bytes;
  tensor = Tensor{};
}

namespace {

/// One stream-ordered driver allocation per tensor: the driver (or an interposer) sees every
/// tensor's lifetime exactly.
class TensorAllocator final : public Allocator {
 public:
  TensorAllocator(const DriverApi& api, CUstream stream) : api_(api), stream_(stream) {}
  void ReleaseAll() override {}

 protected:
  CUdeviceptr DoAllocate(std::size_t bytes) override {
    CUdeviceptr ptr = 0;
    const CUresult result = api_.cuMemAllocAsync(&ptr, bytes, stream_);
    if (result != CUDA_SUCCESS) {
      Check(api_, result, "cuMemAllocAsync of " + std::to_string(bytes) + " bytes");
    }
    return ptr;
  }
  void DoFree(CUdeviceptr ptr, std::size_t) override {
    const CUresult result = api_.cuMemFreeAsync(ptr, stream_);
    if (result != CUDA_SUCCESS) Check(api_, result, "cuMemFreeAsync");
  }

 private:
  const DriverApi& api_;
  CUstream stream_;
};

}  // namespace

namespace detail {
std::unique_ptr<Allocator> MakeTensorAllocator(const DriverApi& api, CUstream stream) {
  return std::make_unique<TensorAllocator>(api, stream);
}
}  // namespace detail

std::unique_ptr<Allocator> MakeAllocator(AllocStyle style, const DriverApi& api, CUdevice device,
                                         CUstream stream) {
  switch (style) {
    case AllocStyle::kCaching:
      return detail::MakeCachingAllocator(api);
    case AllocStyle::kExpandable:
      return detail::MakeExpandableAllocator(api, device);
    case AllocStyle::kTensor:
      break;
  }
  return detail::MakeTensorAllocator(api, stream);
}

}  // namespace chameleon::train_sim
