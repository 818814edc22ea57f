// The module image: each kernel's name, host function, parameter layout and cost model. Costs
// count the arithmetic and the bytes a GPU kernel doing the same work would move, so simgpu's
// virtual clock gives each op a plausible duration.
#include <array>
#include <cstring>

#include "kernel_args.h"
#include "kernels.h"

namespace chameleon::train_sim {
namespace {

using simgpu::KernelCost;
using simgpu::KernelEntry;
using simgpu::LaunchDims;

constexpr double kF = 4.0;  // bytes per fp32 element

double D(void* const* p, int i) { return static_cast<double>(kernels::Int(p, i)); }

KernelCost EmbedFwdCost(void* const* p, const LaunchDims&) {
  return {D(p, 4) * D(p, 6), kF * 3 * D(p, 4) * D(p, 6)};
}
KernelCost EmbedBwdCost(void* const* p, const LaunchDims&) {
  return {2 * D(p, 4) * D(p, 6), kF * (3 * D(p, 4) * D(p, 6) + (D(p, 7) + D(p, 5)) * D(p, 6))};
}
KernelCost LayerNormFwdCost(void* const* p, const LaunchDims&) {
  return {8 * D(p, 5) * D(p, 6), kF * (2 * D(p, 5) * D(p, 6) + 2 * D(p, 5))};
}
KernelCost LayerNormBwdCost(void* const* p, const LaunchDims&) {
  return {14 * D(p, 7) * D(p, 8), kF * (4 * D(p, 7) * D(p, 8) + 2 * D(p, 7))};
}
KernelCost LinearCost(double rows, double in, double out) {
  return {2 * rows * in * out, kF * (rows * in + in * out + rows * out)};
}
KernelCost LinearFwdCost(void* const* p, const LaunchDims&) {
  return LinearCost(D(p, 4), D(p, 5), D(p, 6));
}
KernelCost LinearBwdInputCost(void* const* p, const LaunchDims&) {
  return LinearCost(D(p, 3), D(p, 4), D(p, 5));
}
KernelCost LinearBwdWeightCost(void* const* p, const LaunchDims&) {
  return LinearCost(D(p, 4), D(p, 5), D(p, 6));
}
KernelCost AttentionFwdCost(void* const* p, const LaunchDims&) {
  const double bh = D(p, 3) * D(p, 5), s = D(p, 4), hd = D(p, 6);
  return {bh * (4 * s * s * hd + 5 * s * s), kF * (bh * (4 * s * hd + s * s))};
}
KernelCost AttentionBwdCost(void* const* p, const LaunchDims&) {
  const double bh = D(p, 5) * D(p, 7), s = D(p, 6), hd = D(p, 8);
  return {bh * (8 * s * s * hd + 4 * s * s), kF * (bh * (7 * s * hd + 3 * s * s))};
}
KernelCost Elementwise(double n, double flops_per, double tensors) {
  return {n * flops_per, kF * n * tensors};
}
KernelCost GeluFwdCost(void* const* p, const LaunchDims&) { return Elementwise(D(p, 2), 8, 2); }
KernelCost GeluBwdCost(void* const* p, const LaunchDims&) { return Elementwise(D(p, 3), 12, 3); }
KernelCost AddCost(void* const* p, const LaunchDims&) { return Elementwise(D(p, 3), 1, 3); }
KernelCost AddInPlaceCost(void* const* p, const LaunchDims&) { return Elementwise(D(p, 2), 1, 3); }
KernelCost CrossEntropyFwdCost(void* const* p, const LaunchDims&) {
  return Elementwise(D(p, 3) * D(p, 4), 4, 1);
}
KernelCost CrossEntropyBwdCost(void* const* p, const LaunchDims&) {
  return Elementwise(D(p, 3) * D(p, 4), 5, 2);
}
KernelCost SquareLossFwdCost(void* const* p, const LaunchDims&) {
  return Elementwise(D(p, 2), 2, 1);
}
KernelCost SquareLossBwdCost(void* const* p, const LaunchDims&) {
  return Elementwise(D(p, 2), 1, 2);
}
KernelCost AdamCost(void* const* p, const LaunchDims&) { return Elementwise(D(p, 4), 10, 7); }
KernelCost FillCost(void* const* p, const LaunchDims&) { return Elementwise(D(p, 1), 0, 1); }

// kinds: 'P' device pointer (8 bytes), 'I' int32, 'F' float; naturally aligned in a packed buffer.
KernelEntry Entry(const char* name, simgpu::KernelHostFn fn, simgpu::KernelCostFn cost,
                  const char* kinds) {
  KernelEntry entry{};
  entry.name = name;
  entry.fn = fn;
  entry.cost = cost;
  std::uint32_t offset = 0;
  for (const char* k = kinds; *k != '\0'; ++k) {
    const std::uint32_t size = *k == 'P' ? 8 : 4;
    offset = (offset + size - 1) / size * size;
    entry.params[entry.param_count++] = {offset, size};
    offset += size;
  }
  return entry;
}

std::array<KernelEntry, kKernelCount> BuildTable() {
  namespace k = kernels;
  return {{
      Entry("train_sim_embed_fwd", k::EmbedFwd, EmbedFwdCost, "PPPPIII"),
      Entry("train_sim_embed_bwd", k::EmbedBwd, EmbedBwdCost, "PPPPIIII"),
      Entry("train_sim_layernorm_fwd", k::LayerNormFwd, LayerNormFwdCost, "PPPPPII"),
      Entry("train_sim_layernorm_bwd", k::LayerNormBwd, LayerNormBwdCost, "PPPPPPPIII"),
      Entry("train_sim_linear_fwd", k::LinearFwd, LinearFwdCost, "PPPPIII"),
      Entry("train_sim_linear_bwd_input", k::LinearBwdInput, LinearBwdInputCost, "PPPIII"),
      Entry("train_sim_linear_bwd_weight", k::LinearBwdWeight, LinearBwdWeightCost, "PPPPIII"),
      Entry("train_sim_attention_fwd", k::AttentionFwd, AttentionFwdCost, "PPPIIII"),
      Entry("train_sim_attention_bwd", k::AttentionBwd, AttentionBwdCost, "PPPPPIIII"),
      Entry("train_sim_gelu_fwd", k::GeluFwd, GeluFwdCost, "PPI"),
      Entry("train_sim_gelu_bwd", k::GeluBwd, GeluBwdCost, "PPPI"),
      Entry("train_sim_add", k::Add, AddCost, "PPPI"),
      Entry("train_sim_add_inplace", k::AddInPlace, AddInPlaceCost, "PPI"),
      Entry("train_sim_cross_entropy_fwd", k::CrossEntropyFwd, CrossEntropyFwdCost, "PPPII"),
      Entry("train_sim_cross_entropy_bwd", k::CrossEntropyBwd, CrossEntropyBwdCost, "PPPII"),
      Entry("train_sim_square_loss_fwd", k::SquareLossFwd, SquareLossFwdCost, "PPIF"),
      Entry("train_sim_square_loss_bwd", k::SquareLossBwd, SquareLossBwdCost, "PPIF"),
      Entry("train_sim_adam", k::Adam, AdamCost, "PPPPIFFFF"),
      Entry("train_sim_fill", k::Fill, FillCost, "PIF"),
  }};
}

}  // namespace

const simgpu::ModuleImage& TrainSimModuleImage() {
  static const std::array<KernelEntry, kKernelCount> table = BuildTable();
  static const simgpu::ModuleImage image{simgpu::kModuleImageMagic, simgpu::kModuleImageVersion,
                                         kKernelCount, 0, table.data()};
  return image;
}

}  // namespace chameleon::train_sim
