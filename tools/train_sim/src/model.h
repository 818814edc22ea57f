// A small GPT-style transformer whose every op is a kernel on device memory: embedding,
// L x {layernorm, causal multi-head attention, layernorm, MLP with GELU} with residuals, final
// layernorm, output projection, softmax cross-entropy, full backward, Adam. With the auxiliary
// branch on (--dynamic), an extra head gelu(lnf(x) W_aux) adds a weighted mean-square loss.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "allocator.h"
#include "launcher.h"

namespace chameleon::train_sim {

/// Weight of the auxiliary branch's mean-square loss.
inline constexpr float kAuxLossWeight = 0.1f;

struct ModelConfig {
  int layers = 2;
  int hidden = 64;
  int seq = 32;
  int batch = 4;
  int heads = 1;
  int head_dim = 64;
  int vocab = 256;
  bool recompute = false;  ///< per-layer activation checkpointing
  bool aux_head = false;   ///< allocate the auxiliary branch's weights (--dynamic)
};

/// One trainable tensor with its gradient and Adam state.
struct Param {
  std::string name;
  std::size_t count = 0;  ///< fp32 elements
  float init_scale = 0;   ///< uniform(-s, s) init; 0 means constant init_value
  float init_value = 0;
  Tensor value, grad, m, v;
  int updates = 0;  ///< Adam steps taken (bias correction)
};

/// Saved activations of one layer. x_in is the layer's input (the previous layer's output).
struct LayerActs {
  Tensor x_in, ln1, ln1_stats, qkv, probs, att, x_mid, ln2, ln2_stats, fc, gelu;
};

/// Not thread-safe; all work goes to one stream in program order.
class Model {
 public:
  Model(const ModelConfig& config, const DriverApi& api, Allocator& alloc, Launcher& launcher,
        CUstream stream);

  /// Allocates weights (host-generated from `seed`, copied to the device) and Adam state.
  void Init(std::uint64_t seed);

  /// Forward and backward of one batch. tokens/targets: rows int32 each; loss: one float that
  /// receives the mean loss. Leaves every parameter's gradient allocated and filled.
  void ForwardBackward(const Tensor& tokens, const Tensor& targets, const Tensor& loss, bool aux);
  /// Adam on every parameter that has a gradient.
  void OptimizerStep();
  /// Frees all gradients (zero_grad(set_to_none=True)).
  void DropGrads();
  /// Frees weights and Adam state.
  void Release();

  /// Parameters in a fixed order (the checksum's order).
  std::vector<Param>& params() { return params_; }
  /// The weight the corruption test hook flips a byte of.
  Param& corruption_target() { return P(0, kWqkv); }

 private:
  // Indices of a layer's parameters, relative to layer_base_ + l * kPerLayer.
  enum LayerParam {
    kLn1G,
    kLn1B,
    kWqkv,
    kBqkv,
    kWproj,
    kBproj,
    kLn2G,
    kLn2B,
    kWfc,
    kBfc,
    kWfc2,
    kBfc2,
    kPerLayer
  };
  // Global parameters.
  // Global parameters; the auxiliary head's weight (if any) comes after the layers.
  enum GlobalParam { kWte, kWpe, kLnfG, kLnfB, kWout, kGlobalCount };

  void AddParams();
  void InitParam(Param& param, std::uint64_t seed);
  Param& P(int l, LayerParam which) { return params_[layer_base_ + l * kPerLayer + which]; }
  Param& G(GlobalParam which) { return params_[which]; }
  Param& Aux() { return params_.back(); }
  CUdeviceptr Grad(Param& param);
  Tensor Alloc(std::size_t floats) { return alloc_.Allocate(floats * sizeof(float)); }

  // model_forward.cc
  Tensor LayerForward(int l, LayerActs& acts, bool keep);
  void HeadForward(const Tensor& targets, const Tensor& loss, bool aux);
  // model_backward.cc
  void HeadBackward(const Tensor& targets, bool aux);
  void LayerBackward(int l, LayerActs& acts);
  void LayerNormBackward(const Tensor& dout, const Tensor& x, const Tensor& stats, Param& gamma,
                         Param& beta, const Tensor& dx, bool accumulate);
  void LinearBackward(const Tensor& dout, const Tensor& in, Param& w, Param* bias,
                      const Tensor& din, int in_dim, int out_dim);

  ModelConfig config_;
  const DriverApi& api_;
  Allocator& alloc_;
  Launcher& launcher_;
  CUstream stream_;
  std::int32_t rows_;  // batch * seq
  int layer_base_ = kGlobalCount;
  std::vector<Param> params_;

  // Activations of the step in flight.
  std::vector<LayerActs> acts_;
  Tensor x_final_, lnf_, lnf_stats_, logits_, aux_pre_, aux_act_;
  Tensor dres_;  // gradient of the residual stream, updated in place layer by layer
};

}  // namespace chameleon::train_sim
