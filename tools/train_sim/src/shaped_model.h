// The model-shaped network (docs/trainer.md, "Model-shaped mode"): parameters and their
// mixed-precision Adam state, and one training step's forward, backward and optimizer phases as
// sampled-kernel launches, allocating and freeing every tensor in the order a PyTorch step does.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "allocator.h"
#include "driver.h"
#include "model_spec.h"
#include "op_cost.h"
#include "sampled_launcher.h"

namespace chameleon::train_sim {

namespace detail {
/// Op codes of the sampled launches; a launch's tag is Tag(layer, op), so an op recomputed in
/// backward carries the tag (and hence writes the values) of its first run.
enum Op : std::uint32_t {
  kEmbedFwd = 1,
  kEmbedReduce,
  kFinalNormFwd,
  kHeadGather,
  kHeadFwd,
  kAuxFwd,
  kLossFwd,
  kLossBwd,
  kHeadDgrad,
  kHeadWgradGather,
  kHeadWgrad,
  kHeadReduce,
  kAuxBwd,
  kFinalNormBwd,
  kEmbedGather,
  kEmbedBwd,
  kNorm1Fwd = 32,
  kGather1,
  kQkvFwd,
  kAttnFwd,
  kScoresFwd,
  kSoftmaxFwd,
  kProbDropFwd,
  kAvFwd,
  kProjFwd,
  kReduce1,
  kResid1Fwd,
  kNorm2Fwd,
  kGather2,
  kFc1Fwd,
  kActFwd,
  kFc2Fwd,
  kReduce2,
  kResid2Fwd,
  kResid2Bwd = 64,
  kGatherFc2Grad,
  kFc2Dgrad,
  kFc2Wgrad,
  kActBwd,
  kFc1Dgrad,
  kRegather2,
  kFc1Wgrad,
  kReduceNorm2Grad,
  kNorm2Bwd,
  kResid1Bwd,
  kGatherProjGrad,
  kProjDgrad,
  kProjWgrad,
  kAttnBwd,
  kAvBwd,
  kProbDropBwd,
  kSoftmaxBwd,
  kScoresBwd,
  kQkvDgrad,
  kRegather1,
  kQkvWgrad,
  kReduceNorm1Grad,
  kNorm1Bwd,
};
/// layer -1: ops outside the layers.
inline std::uint32_t Tag(int layer, Op op) {
  return (static_cast<std::uint32_t>(layer + 1) << 8) | op;
}
}  // namespace detail

/// One parameter tensor on this GPU: bf16 weight and gradient, fp32 master copy and Adam moments.
struct ShapedParam {
  std::string name;
  std::size_t elements = 0;
  Tensor weight, grad, master, m, v;
};

/// Saved activations of one layer (SavedPerLayer names them; the layer input lives in the
/// residual stream).
struct LayerActivations {
  Tensor norm1_out, q, k, v, softmax, softmax_mask, softmax_dropped, context, attn_mask, x_mid,
      norm2_out, fc1_out, act_out, mlp_mask;
};

/// The part of the network one pipeline stage runs: layers [first_layer, end_layer), with the
/// embedding on the first stage and final norm, head and loss on the last. The default is the
/// whole network (one stage).
struct StageSlice {
  int first_layer = 0;
  int end_layer = -1;  ///< -1: the spec's layer count
  bool embedding = true;
  bool head = true;
};

/// What one stage's forward of one micro-batch reads: the data (first and last stage) or the
/// previous stage's output, received on this device (`input`, owned by the model from then on).
struct StageInput {
  Tensor tokens, targets, loss;  ///< loss: the 8-byte digest the last stage writes
  Tensor input;                  ///< stages after the first: the received activation
  bool aux = false;
};

/// Owns one stage's parameters and the activations of its micro-batches in flight (the whole
/// network and one micro-batch by default). Not thread-safe.
class ShapedModel {
 public:
  ShapedModel(const ShapeSpec& spec, bool recompute, Allocator& alloc, SampledLauncher& launcher,
              const StageSlice& slice = StageSlice{});

  /// Allocates every weight, then every master copy and moment, and writes them (step -1).
  void Init();
  /// Forward phase: embedding, layers, head and loss; writes the step's digest into `loss`
  /// (8 bytes). `tokens`, `targets`: int32 [micro_batch, seq].
  void Forward(const Tensor& tokens, const Tensor& targets, const Tensor& loss, bool aux);
  /// Backward phase: frees every activation, allocates every gradient.
  void Backward();
  /// This stage's forward of the current micro-batch. Returns the stage's output (to be sent
  /// to the next stage, owned by the caller from then on), or nothing on the last stage.
  Tensor ForwardStage(const StageInput& in);
  /// This stage's backward of the current micro-batch; `d_output` (ignored on the last stage)
  /// is the received gradient of the stage's output, owned by the model from then on. Weight
  /// gradients that already exist (an earlier micro-batch of the step) are accumulated into.
  /// Returns the gradient of the stage's input (owned by the caller), or nothing on the first.
  Tensor BackwardStage(Tensor d_output);
  /// Set aside the current micro-batch's activations between its forward and its backward
  /// (1F1B keeps several in flight) and bring them back.
  void Park(int micro_batch);
  void Resume(int micro_batch);
  /// Optimizer phase: Adam on the master weights and moments, bf16 weights rewritten; then the
  /// gradients are freed (zero_grad(set_to_none=True)). `skip`: free the gradients only.
  void OptimizerStep(bool skip);
  /// Frees every parameter tensor.
  void Release();

  void set_step(int step) { step_ = step; }
  const std::vector<ShapedParam>& params() const { return params_; }
  /// fp32 master weights and both moments.
  std::size_t optimizer_state_bytes() const;
  /// Test hook: the largest activation of layer 0 still live between forward and backward.
  Tensor CorruptionTarget() const;

 private:
  enum Slot { kNorm1, kQkv, kWo, kNorm2, kFc1, kFc2, kSlots };
  ShapedParam& LayerParam(int layer, Slot slot);
  ShapedParam& Head();
  ShapedParam& FinalNorm();

  Tensor Alloc(std::size_t bytes) { return alloc_.Allocate(bytes); }
  void Free(Tensor& t) { alloc_.Free(t); }
  /// Allocates p's gradient unless an earlier micro-batch did; returns the gradient to
  /// accumulate into (the existing one), or nothing when freshly allocated.
  Tensor AllocGrad(ShapedParam& p);
  void Run(std::uint32_t tag, std::initializer_list<Tensor> in, std::initializer_list<Tensor> out,
           const cost::Cost& c);
  // Entering a tensor-parallel region: all-gather under sequence parallelism, else the same
  // tensor. DropGathered frees what Gather allocated.
  Tensor Gather(std::uint32_t tag, const Tensor& outer);
  void DropGathered(Tensor& gathered, const Tensor& outer);
  // Leaving one: all-reduce in place, or reduce-scatter into a new outer tensor under sequence
  // parallelism (freeing `full`).
  Tensor Reduce(std::uint32_t tag, Tensor& full);

  void LayerForward(int layer, bool keep);
  void AttentionForward(int layer, LayerActivations& a);
  Tensor HeadBackward();
  Tensor LayerBackward(int layer, Tensor dx_out);
  Tensor MlpBackward(int layer, LayerActivations& a, const Tensor& dx_out);
  void AttentionBackward(int layer, LayerActivations& a, Tensor& d_context, Tensor& dq, Tensor& dk,
                         Tensor& dv);
  void FreeLayer(LayerActivations& a);

  double OuterBytes() const { return cost::kBf16 * static_cast<double>(OuterRows(spec_)) * h_; }
  double FullBytes() const { return cost::kBf16 * static_cast<double>(Tokens(spec_)) * h_; }

  /// The activations of one micro-batch, parked between its forward and its backward.
  struct InFlight {
    std::vector<Tensor> resid;
    std::vector<LayerActivations> acts;
    Tensor tokens, targets, loss, normed, logits, aux;
  };

  ShapeSpec spec_;
  bool recompute_;
  StageSlice slice_;
  std::size_t param_base_ = 0;  // index of params_[0] in ParamShapes(spec_): Init/Adam tags
  Allocator& alloc_;
  SampledLauncher& launcher_;
  double h_;
  int step_ = -1;
  std::vector<ShapedParam> params_;
  std::vector<Tensor> resid_;  // resid_[l]: layer l's input; resid_[layers]: the last output
  std::vector<LayerActivations> acts_;
  Tensor tokens_, targets_, loss_;  // borrowed for the step
  Tensor normed_, logits_, aux_;
  std::vector<std::pair<int, InFlight>> parked_;
};

}  // namespace chameleon::train_sim
