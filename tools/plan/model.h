// Transformer models the wafer planner trains: dimensions, batch shape, and where they come from.
// Presets are cited in docs/planner.md; YAML adds others. Plain data; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chameleon::plan {

struct ModelSpec {
  std::string name;
  std::string source;  ///< where the dimensions come from
  int layers = 0;
  int hidden = 0;  ///< H
  int ffn = 0;     ///< FFN inner size (per expert for MoE)
  int heads = 0;
  int kv_heads = 0;  ///< grouped-query attention; = heads for multi-head
  int vocab = 0;
  int seq = 0;             ///< S, tokens per sequence
  bool gated_ffn = false;  ///< SwiGLU (three FFN matrices) instead of two
  int experts = 0;         ///< MoE experts per MoE layer; 0 = dense
  int top_k = 0;           ///< experts each token visits
  int moe_every = 0;       ///< every n-th layer is MoE (GShard: 2)
  int micro_batch = 1;     ///< sequences per micro-batch
  int micro_batches = 0;   ///< per iteration; 0 = 4 × pipeline stages
  bool IsMoeLayer(int layer) const {
    return experts > 0 && moe_every > 0 && layer % moe_every == moe_every - 1;
  }
};

/// "llama2-30b", "llama3-70b", "gpt-175b", "gshard-137b"; nullopt otherwise.
std::optional<ModelSpec> ModelPreset(std::string_view name);
std::vector<std::string> ModelPresetNames();
/// Reads a model file (keys as the ModelSpec fields). Throws std::runtime_error.
ModelSpec LoadModelYaml(const std::string& path);
/// Parameters of one layer (all experts of an MoE layer).
double LayerParams(const ModelSpec& m, int layer);
/// Parameters of the whole model, embedding and output head included.
double ModelParams(const ModelSpec& m);

}  // namespace chameleon::plan
