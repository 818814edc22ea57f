#include "launcher.h"

#include <stdexcept>

namespace chameleon::train_sim {
namespace {

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

}  // namespace

Launcher::Launcher(const DriverApi& api, CUstream stream)
    : api_(api), stream_(stream), sequence_hash_(kFnvOffset) {
  const simgpu::ModuleImage& image = TrainSimModuleImage();
  Check(api_, api_.cuModuleLoadData(&module_, &image), "cuModuleLoadData(train-sim kernels)");
  for (std::uint32_t i = 0; i < kKernelCount; ++i) {
    const char* name = image.kernels[i].name;
    Check(api_, api_.cuModuleGetFunction(&functions_[i], module_, name),
          std::string("cuModuleGetFunction(") + name + ")");
  }
}

Launcher::~Launcher() {
  // Teardown after the stream was synchronised; an error here has nobody left to report to.
  if (module_ != nullptr) api_.cuModuleUnload(module_);
}

void Launcher::LaunchRaw(KernelId id, void** params, const std::uint32_t* sizes,
                         std::uint32_t count) {
  const auto index = static_cast<std::uint32_t>(id);
  const simgpu::KernelEntry& entry = TrainSimModuleImage().kernels[index];
  // A mismatch is a bug in the trainer, not a runtime condition: fail loudly before the kernel
  // reads a wrong-sized value.
  if (count != entry.param_count) {
    throw std::logic_error(std::string("wrong argument count for ") + entry.name);
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    if (sizes[i] != entry.params[i].size) {
      throw std::logic_error(std::string("wrong argument size for ") + entry.name);
    }
  }
  const CUresult result =
      api_.cuLaunchKernel(functions_[index], 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr);
  if (result != CUDA_SUCCESS)
    Check(api_, result, std::string("cuLaunchKernel(") + entry.name + ")");
  sequence_hash_ = (sequence_hash_ ^ (index + 1)) * kFnvPrime;
}

std::uint64_t Launcher::TakeSequenceHash() {
  const std::uint64_t hash = sequence_hash_;
  sequence_hash_ = kFnvOffset;
  return hash;
}

}  // namespace chameleon::train_sim
