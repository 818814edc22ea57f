#include "sampled_launcher.h"

#include "sampled_kernel.h"

namespace chameleon::train_sim {
namespace {

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

// One tensor argument as the kernel reads it: pointer, bytes split in 31-bit halves (int32
// parameters only).
struct TensorArg {
  CUdeviceptr ptr;
  std::int32_t low;
  std::int32_t high;
};

TensorArg ArgOf(const Tensor& t) {
  return {t.ptr, static_cast<std::int32_t>(t.bytes & 0x7fffffffu),
          static_cast<std::int32_t>(t.bytes >> 31)};
}

}  // namespace

SampledLauncher::SampledLauncher(const DriverApi& api, CUstream stream)
    : api_(api), stream_(stream), sequence_hash_(kFnvOffset) {
  Check(api_, api_.cuModuleLoadData(&module_, &SampledModuleImage()),
        "cuModuleLoadData(train-sim sampled kernel)");
  Check(api_, api_.cuModuleGetFunction(&function_, module_, "train_sim_sampled"),
        "cuModuleGetFunction(train_sim_sampled)");
}

SampledLauncher::~SampledLauncher() {
  if (module_ != nullptr) api_.cuModuleUnload(module_);
}

void SampledLauncher::Launch(const SampledOp& op, std::int32_t step) {
  std::array<TensorArg, 9> tensors{};
  for (int i = 0; i < 5; ++i) tensors[i] = ArgOf(op.in[i]);
  for (int i = 0; i < 4; ++i) tensors[5 + i] = ArgOf(op.out[i]);
  auto tag = static_cast<std::int32_t>(op.tag);
  float costs[3] = {static_cast<float>(op.flops), static_cast<float>(op.bytes),
                    static_cast<float>(op.link_bytes)};
  void* params[32];
  int n = 0;
  for (TensorArg& t : tensors) {
    params[n++] = &t.ptr;
    params[n++] = &t.low;
    params[n++] = &t.high;
  }
  params[n++] = &tag;
  params[n++] = &step;
  for (float& c : costs) params[n++] = &c;
  Check(api_, api_.cuLaunchKernel(function_, 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr),
        "cuLaunchKernel(train_sim_sampled)");
  sequence_hash_ = (sequence_hash_ ^ op.tag) * kFnvPrime;
}

std::uint64_t SampledLauncher::TakeSequenceHash() {
  const std::uint64_t hash = sequence_hash_;
  sequence_hash_ = kFnvOffset;
  return hash;
}

}  // namespace chameleon::train_sim
