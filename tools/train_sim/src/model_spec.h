// The model-shaped trainer's architectures and their per-GPU shapes (docs/trainer.md,
// "Model-shaped mode"): published hyper-parameters, the Megatron tensor-parallel shard, and the
// byte counts that follow from them (parameters, Korthikanti et al.'s activations, FLOPs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chameleon::train_sim {

/// Published hyper-parameters of one model (sources in docs/trainer.md). Plain value type.
struct Architecture {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;  ///< < heads: grouped-query attention (Llama 3)
  int ffn = 0;       ///< MLP inner width (4h for GPT-2; the SwiGLU width for Llama)
  int vocab = 0;
  int context = 0;          ///< longest sequence the model was trained with
  bool gated_mlp = false;   ///< SwiGLU (two fc1 halves) instead of GELU
  bool layer_norm = false;  ///< LayerNorm with bias (GPT-2) instead of RMSNorm
  bool biases = false;      ///< linear layers carry biases (GPT-2)
  bool dropout = false;     ///< dropout after attention probs, projection and MLP (GPT-2)
  bool tied_embedding = false;
  bool learned_positions = false;
};

/// The architecture called `name` (gpt2-xl, llama2-7b, llama2-13b, llama3-8b); false if none.
bool FindArchitecture(const std::string& name, Architecture* out);

/// One run's shape: the architecture, the micro-batch and the per-GPU shard.
struct ShapeSpec {
  Architecture arch;
  int layers = 0;  ///< arch.layers unless --layers overrides it
  int micro_batch = 1;
  int seq = 0;
  int tp = 1;
  bool sequence_parallel = false;  ///< meaningful only when tp > 1
  bool flash_attention = true;
};

/// A tensor a layer keeps for backward: its name and its bytes on one GPU.
struct SavedTensor {
  const char* name;
  std::size_t bytes;
};

/// The activations one layer saves for backward, in the order forward allocates them, bf16 with
/// 1-byte dropout masks (Korthikanti et al. 2022, section 4.1). The layer's input, which is the
/// previous layer's output, comes first. For GPT-2 with tp = 1 they sum to 34·s·b·h bytes, plus
/// 5·a·s²·b without flash attention.
std::vector<SavedTensor> SavedPerLayer(const ShapeSpec& spec);

/// Sum of SavedPerLayer.
std::size_t ActivationBytesPerLayer(const ShapeSpec& spec);

/// One parameter tensor's name and its element count on one GPU (biases are stored with their
/// weight, as one tensor).
struct ParamShape {
  std::string name;
  std::size_t elements;
};

/// Every parameter tensor on one GPU, in a fixed order (embedding, layers, final norm, head).
std::vector<ParamShape> ParamShapes(const ShapeSpec& spec);

/// Derived per-GPU widths.
inline int LocalHeads(const ShapeSpec& s) { return s.arch.heads / s.tp; }
inline int HeadDim(const ShapeSpec& s) { return s.arch.hidden / s.arch.heads; }
inline std::size_t LocalKvWidth(const ShapeSpec& s) {
  return static_cast<std::size_t>(s.arch.kv_heads / s.tp) * HeadDim(s);
}
inline std::size_t LocalQWidth(const ShapeSpec& s) {
  return static_cast<std::size_t>(LocalHeads(s)) * HeadDim(s);
}
inline std::size_t LocalFfn(const ShapeSpec& s) { return s.arch.ffn / s.tp; }
inline std::size_t Fc1Width(const ShapeSpec& s) { return LocalFfn(s) * (s.arch.gated_mlp ? 2 : 1); }
inline std::size_t LocalVocab(const ShapeSpec& s) {
  return (static_cast<std::size_t>(s.arch.vocab) + s.tp - 1) / s.tp;
}
inline std::size_t Tokens(const ShapeSpec& s) {
  return static_cast<std::size_t>(s.micro_batch) * s.seq;
}
/// Rows of the tensors outside the tensor-parallel regions: split across GPUs only under
/// sequence parallelism.
inline std::size_t OuterRows(const ShapeSpec& s) {
  return s.tp > 1 && s.sequence_parallel ? Tokens(s) / s.tp : Tokens(s);
}

/// Model FLOPs of one step on one GPU, as MFU figures count them (PaLM, appendix B; torchtitan):
/// 6·N·tokens + 12·L·s·h·tokens (attention, not halved for the causal mask), divided by tp, with
/// N = FlopParameters.
double ModelFlopsPerStep(const ShapeSpec& spec);

/// Parameters of the whole model (all GPUs).
double TotalParameters(const ShapeSpec& spec);

/// TotalParameters less the embedding lookups (input table unless tied, learned positions).
double FlopParameters(const ShapeSpec& spec);

}  // namespace chameleon::train_sim
