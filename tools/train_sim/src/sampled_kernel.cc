#include "sampled_kernel.h"

#include <array>
#include <cstring>

#include "kernel_args.h"

namespace chameleon::train_sim {
namespace {

constexpr int kTensorArgs = kSampledInputs + kSampledOutputs;
constexpr int kTagParam = 3 * kTensorArgs;
constexpr int kStepParam = kTagParam + 1;
constexpr int kFlopsParam = kStepParam + 1;
constexpr int kParamCount = kFlopsParam + 3;
static_assert(kParamCount <= static_cast<int>(simgpu::kMaxKernelParams));

std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

unsigned char* Pointer(void* const* p, int tensor) {
  return reinterpret_cast<unsigned char*>(
      static_cast<std::uintptr_t>(kernels::Arg<CUdeviceptr>(p, 3 * tensor)));
}

std::size_t Bytes(void* const* p, int tensor) {
  const auto low = static_cast<std::uint32_t>(kernels::Int(p, 3 * tensor + 1));
  const auto high = static_cast<std::uint32_t>(kernels::Int(p, 3 * tensor + 2));
  return (static_cast<std::size_t>(high) << 31) | low;
}

simgpu::KernelCost SampledCost(void* const* p, const simgpu::LaunchDims&) {
  return {kernels::Float(p, kFlopsParam), kernels::Float(p, kFlopsParam + 1),
          kernels::Float(p, kFlopsParam + 2)};
}

std::array<simgpu::KernelEntry, 1> BuildTable() {
  simgpu::KernelEntry entry{};
  entry.name = "train_sim_sampled";
  entry.fn = kernels::Sampled;
  entry.cost = SampledCost;
  std::uint32_t offset = 0;
  for (int i = 0; i < kParamCount; ++i) {
    const std::uint32_t size = i < kTagParam && i % 3 == 0 ? 8 : 4;
    offset = (offset + size - 1) / size * size;
    entry.params[entry.param_count++] = {offset, size};
    offset += size;
  }
  return {entry};
}

}  // namespace

std::size_t SampledWordCount(std::size_t bytes) {
  std::size_t count = 0;
  ForEachSampledWord(bytes, [&](std::size_t) { ++count; });
  return count;
}

const simgpu::ModuleImage& SampledModuleImage() {
  static const std::array<simgpu::KernelEntry, 1> table = BuildTable();
  static const simgpu::ModuleImage image{simgpu::kModuleImageMagic, simgpu::kModuleImageVersion, 1,
                                         0, table.data()};
  return image;
}

namespace kernels {

void Sampled(void* const* p, const simgpu::LaunchDims&) {
  const auto tag = static_cast<std::uint32_t>(Int(p, kTagParam));
  const auto step = static_cast<std::uint32_t>(Int(p, kStepParam));
  std::uint64_t h = Mix((std::uint64_t{tag} << 32 | step) + 0x9e3779b97f4a7c15ull);
  for (int i = 0; i < kSampledInputs; ++i) {
    const unsigned char* in = Pointer(p, i);
    if (in == nullptr) continue;
    ForEachSampledWord(Bytes(p, i), [&](std::size_t offset) {
      std::uint32_t word;
      std::memcpy(&word, in + offset, sizeof word);
      h = Mix(h ^ (std::uint64_t{word} << 32 | (offset & 0xffffffffu)));
    });
    h = Mix(h + static_cast<std::uint64_t>(i));
  }
  for (int k = 0; k < kSampledOutputs; ++k) {
    unsigned char* out = Pointer(p, kSampledInputs + k);
    if (out == nullptr) continue;
    const std::uint64_t base = Mix(h + 0x632be59bd9b4e019ull * static_cast<std::uint64_t>(k + 1));
    ForEachSampledWord(Bytes(p, kSampledInputs + k), [&](std::size_t offset) {
      const auto word = static_cast<std::uint32_t>(Mix(base ^ offset));
      std::memcpy(out + offset, &word, sizeof word);
    });
  }
}

}  // namespace kernels
}  // namespace chameleon::train_sim
