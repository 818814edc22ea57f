// The trainer's kernels: host functions with real fp32 arithmetic, packaged as a simgpu module
// image and launched through cuLaunchKernel. On simgpu a CUdeviceptr is a host address, so a
// kernel dereferences its pointer arguments directly; matrix products use single-threaded
// OpenBLAS so that every run computes bit-identical results.
//
// Parameter kinds: P = CUdeviceptr (8 bytes), I = int32 (4 bytes), F = float (4 bytes). All
// matrices are row-major fp32; "rows" is batch * seq.
#pragma once

#include <cstdint>

#include "chameleon/simgpu/module_image.h"

namespace chameleon::train_sim {

/// Index of each kernel in the module image. The signature comment lists the parameters.
enum class KernelId : std::uint32_t {
  kEmbedFwd,         ///< (P tokens, P wte, P wpe, P out, I rows, I seq, I hidden)
  kEmbedBwd,         ///< (P tokens, P dout, P dwte, P dwpe, I rows, I seq, I hidden, I vocab)
  kLayerNormFwd,     ///< (P x, P gamma, P beta, P out, P stats, I rows, I hidden)
  kLayerNormBwd,     ///< (P dout, P x, P stats, P gamma, P dx, P dgamma, P dbeta, I rows,
                     ///<  I hidden, I accumulate)
  kLinearFwd,        ///< (P in, P w, P bias|0, P out, I rows, I in_dim, I out_dim)
  kLinearBwdInput,   ///< (P dout, P w, P din, I rows, I in_dim, I out_dim)
  kLinearBwdWeight,  ///< (P in, P dout, P dw, P dbias|0, I rows, I in_dim, I out_dim)
  kAttentionFwd,     ///< (P qkv, P probs, P out, I batch, I seq, I heads, I head_dim)
  kAttentionBwd,     ///< (P dout, P qkv, P probs, P dqkv, P scratch, I batch, I seq, I heads,
                     ///<  I head_dim)
  kGeluFwd,          ///< (P in, P out, I n)
  kGeluBwd,          ///< (P in, P dout, P din, I n)
  kAdd,              ///< (P a, P b, P out, I n)
  kAddInPlace,       ///< (P acc, P x, I n)
  kCrossEntropyFwd,  ///< (P logits, P targets, P loss, I rows, I vocab): loss[0] = mean
  kCrossEntropyBwd,  ///< (P logits, P targets, P dlogits, I rows, I vocab)
  kSquareLossFwd,    ///< (P x, P loss, I n, F weight): loss[0] += weight * mean(x^2)
  kSquareLossBwd,    ///< (P x, P dx, I n, F weight)
  kAdam,             ///< (P param, P grad, P m, P v, I n, F lr_t, F beta1, F beta2, F eps)
  kFill,             ///< (P out, I n, F value)
  kCount,
};

inline constexpr std::uint32_t kKernelCount = static_cast<std::uint32_t>(KernelId::kCount);

/// The module image handed to cuModuleLoadData; static, so it outlives every module.
const simgpu::ModuleImage& TrainSimModuleImage();

namespace kernels {
// Host functions (kernels_forward.cc / kernels_backward.cc), in KernelId order.
void EmbedFwd(void* const* p, const simgpu::LaunchDims& d);
void EmbedBwd(void* const* p, const simgpu::LaunchDims& d);
void LayerNormFwd(void* const* p, const simgpu::LaunchDims& d);
void LayerNormBwd(void* const* p, const simgpu::LaunchDims& d);
void LinearFwd(void* const* p, const simgpu::LaunchDims& d);
void LinearBwdInput(void* const* p, const simgpu::LaunchDims& d);
void LinearBwdWeight(void* const* p, const simgpu::LaunchDims& d);
void AttentionFwd(void* const* p, const simgpu::LaunchDims& d);
void AttentionBwd(void* const* p, const simgpu::LaunchDims& d);
void GeluFwd(void* const* p, const simgpu::LaunchDims& d);
void GeluBwd(void* const* p, const simgpu::LaunchDims& d);
void Add(void* const* p, const simgpu::LaunchDims& d);
void AddInPlace(void* const* p, const simgpu::LaunchDims& d);
void CrossEntropyFwd(void* const* p, const simgpu::LaunchDims& d);
void CrossEntropyBwd(void* const* p, const simgpu::LaunchDims& d);
void SquareLossFwd(void* const* p, const simgpu::LaunchDims& d);
void SquareLossBwd(void* const* p, const simgpu::LaunchDims& d);
void Adam(void* const* p, const simgpu::LaunchDims& d);
void Fill(void* const* p, const simgpu::LaunchDims& d);
}  // namespace kernels

}  // namespace chameleon::train_sim
