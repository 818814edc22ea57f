#include "kernels.h"

#include <cstring>

namespace chameleon::replay {
namespace {

using simgpu::KernelCost;
using simgpu::KernelEntry;
using simgpu::LaunchDims;

std::uint64_t Mix(std::uint64_t a, std::uint64_t b) {  // splitmix64 finaliser over a ^ f(b)
  std::uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
T Param(void* const* params, int i) {
  T v;
  std::memcpy(&v, params[i], sizeof v);
  return v;
}

std::uint64_t* Word(CUdeviceptr base, std::uint64_t offset) {
  return reinterpret_cast<std::uint64_t*>(static_cast<std::uintptr_t>(base + offset));
}

// replay_op: params 0 salt, 1 n_in, 2 n_out, 3 cost, 4 stride, 5 digest, 6+2i ptr_i, 7+2i words_i.
void OpKernel(void* const* params, const LaunchDims&) {
  const auto n_in = Param<std::uint32_t>(params, 1);
  const auto n_out = Param<std::uint32_t>(params, 2);
  const std::uint64_t stride = Param<std::uint32_t>(params, 4);
  const auto digest = Param<CUdeviceptr>(params, 5);
  std::uint64_t acc = Mix(Param<std::uint32_t>(params, 0), n_in * 131 + n_out);
  for (std::uint32_t t = 0; t < n_in + n_out && t < kTensorsPerLaunch; ++t) {
    const auto base = Param<CUdeviceptr>(params, 6 + 2 * static_cast<int>(t));
    const std::uint64_t bytes =
        std::uint64_t{Param<std::uint32_t>(params, 7 + 2 * static_cast<int>(t))} * 8;
    for (std::uint64_t off = 0; off < bytes; off += stride) {
      if (t < n_in) {
        acc = Mix(acc, *Word(base, off));
      } else {
        *Word(base, off) = Mix(acc, off + t);
      }
    }
  }
  *Word(digest, 0) = Mix(*Word(digest, 0), acc);
}

KernelCost OpCost(void* const* params, const LaunchDims&) {
  return KernelCost{0, static_cast<double>(Param<float>(params, 3))};
}

void InitKernel(void* const* params, const LaunchDims&) {
  const auto base = Param<CUdeviceptr>(params, 0);
  const std::uint64_t bytes = std::uint64_t{Param<std::uint32_t>(params, 1)} * 8;
  const std::uint64_t stride = Param<std::uint32_t>(params, 2);
  const std::uint64_t seed =
      Param<std::uint32_t>(params, 3) | std::uint64_t{Param<std::uint32_t>(params, 4)} << 32;
  for (std::uint64_t off = 0; off < bytes; off += stride) *Word(base, off) = Mix(seed, off);
}

void DigestKernel(void* const* params, const LaunchDims&) {
  const auto digest = Param<CUdeviceptr>(params, 0);
  const auto base = Param<CUdeviceptr>(params, 1);
  const std::uint64_t bytes = std::uint64_t{Param<std::uint32_t>(params, 2)} * 8;
  const std::uint64_t stride = Param<std::uint32_t>(params, 3);
  std::uint64_t acc = *Word(digest, 0);
  for (std::uint64_t off = 0; off < bytes; off += stride) acc = Mix(acc, *Word(base, off));
  *Word(digest, 0) = acc;
}

KernelEntry MakeOpEntry(const char* name) {
  KernelEntry e{name, OpKernel, OpCost, 6 + 2 * kTensorsPerLaunch, {}};
  e.params[0] = {0, 4};
  e.params[1] = {4, 4};
  e.params[2] = {8, 4};
  e.params[3] = {12, 4};
  e.params[4] = {16, 4};
  e.params[5] = {24, 8};
  for (std::uint32_t i = 0; i < kTensorsPerLaunch; ++i) {
    e.params[6 + 2 * i] = {32 + 16 * i, 8};
    e.params[7 + 2 * i] = {40 + 16 * i, 4};
  }
  return e;
}

}  // namespace

void OpLaunch::ParamPointers(void** out) {
  out[0] = &salt;
  out[1] = &n_in;
  out[2] = &n_out;
  out[3] = &cost_bytes;
  out[4] = &stride;
  out[5] = &digest;
  for (std::uint32_t i = 0; i < kTensorsPerLaunch; ++i) {
    out[6 + 2 * i] = &ptr[i];
    out[7 + 2 * i] = &words[i];
  }
}

void InitLaunch::ParamPointers(void** out) {
  out[0] = &ptr;
  out[1] = &words;
  out[2] = &stride;
  out[3] = &seed_lo;
  out[4] = &seed_hi;
}

void DigestLaunch::ParamPointers(void** out) {
  out[0] = &digest;
  out[1] = &ptr;
  out[2] = &words;
  out[3] = &stride;
}

ReplayModule::ReplayModule(const std::vector<std::string>& op_names) : names_(op_names) {
  entries_.push_back(
      {kInitKernel, InitKernel, nullptr, 5, {{0, 8}, {8, 4}, {12, 4}, {16, 4}, {20, 4}}});
  entries_.push_back({kDigestKernel, DigestKernel, nullptr, 4, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}});
  entries_.push_back(MakeOpEntry(kProbeKernel));
  for (const std::string& name : names_) entries_.push_back(MakeOpEntry(name.c_str()));
  image_ = simgpu::ModuleImage{simgpu::kModuleImageMagic, simgpu::kModuleImageVersion,
                               static_cast<std::uint32_t>(entries_.size()), 0, entries_.data()};
}

}  // namespace chameleon::replay
