#include "model_spec.h"

namespace chameleon::train_sim {
namespace {

Architecture Gpt2Xl() {
  Architecture a;
  a.name = "gpt2-xl";
  a.layers = 48;
  a.hidden = 1600;
  a.heads = 25;
  a.kv_heads = 25;
  a.ffn = 4 * 1600;
  a.vocab = 50257;
  a.context = 1024;
  a.layer_norm = a.biases = a.dropout = a.tied_embedding = a.learned_positions = true;
  return a;
}

Architecture Llama(const char* name, int layers, int hidden, int heads, int kv_heads, int ffn,
                   int vocab, int context) {
  Architecture a;
  a.name = name;
  a.layers = layers;
  a.hidden = hidden;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.ffn = ffn;
  a.vocab = vocab;
  a.context = context;
  a.gated_mlp = true;
  return a;
}

}  // namespace

bool FindArchitecture(const std::string& name, Architecture* out) {
  const Architecture all[] = {
      Gpt2Xl(),
      Llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
      Llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
      Llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
  };
  for (const Architecture& a : all) {
    if (a.name == name) {
      *out = a;
      return true;
    }
  }
  return false;
}

std::vector<SavedTensor> SavedPerLayer(const ShapeSpec& s) {
  constexpr std::size_t kBf16 = 2;
  const std::size_t h = static_cast<std::size_t>(s.arch.hidden);
  const std::size_t outer = OuterRows(s) * h;  // elements of one outer [rows, h] tensor
  const std::size_t tokens = Tokens(s);
  const std::size_t scores = static_cast<std::size_t>(s.micro_batch) * LocalHeads(s) *
                             static_cast<std::size_t>(s.seq) * s.seq;
  std::vector<SavedTensor> saved = {
      {"x_in", kBf16 * outer},       // layer input = first norm's input
      {"norm1_out", kBf16 * outer},  // QKV GEMM input
      {"q", kBf16 * tokens * LocalQWidth(s)},
      {"k", kBf16 * tokens * LocalKvWidth(s)},
      {"v", kBf16 * tokens * LocalKvWidth(s)},
  };
  if (!s.flash_attention) {
    saved.push_back({"softmax", kBf16 * scores});
    if (s.arch.dropout) {
      saved.push_back({"softmax_mask", scores});
      saved.push_back({"softmax_dropped", kBf16 * scores});
    }
  }
  saved.push_back({"context", kBf16 * tokens * LocalQWidth(s)});  // output-projection input
  if (s.arch.dropout) saved.push_back({"attn_mask", outer});
  saved.push_back({"x_mid", kBf16 * outer});      // second norm's input
  saved.push_back({"norm2_out", kBf16 * outer});  // fc1 input
  saved.push_back({"fc1_out", kBf16 * tokens * Fc1Width(s)});
  saved.push_back({"act_out", kBf16 * tokens * LocalFfn(s)});  // fc2 input
  if (s.arch.dropout) saved.push_back({"mlp_mask", outer});
  return saved;
}

std::size_t ActivationBytesPerLayer(const ShapeSpec& spec) {
  std::size_t total = 0;
  for (const SavedTensor& t : SavedPerLayer(spec)) total += t.bytes;
  return total;
}

std::vector<ParamShape> ParamShapes(const ShapeSpec& s) {
  const std::size_t h = static_cast<std::size_t>(s.arch.hidden);
  const std::size_t norm = s.arch.layer_norm ? 2 * h : h;  // gamma (+ beta)
  const std::size_t bias = s.arch.biases ? 1 : 0;
  const std::size_t qkv_out = LocalQWidth(s) + 2 * LocalKvWidth(s);
  std::vector<ParamShape> params = {{"embed", LocalVocab(s) * h}};
  if (s.arch.learned_positions) {
    params.push_back({"positions", static_cast<std::size_t>(s.arch.context) * h});
  }
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    params.push_back({p + "norm1", norm});
    params.push_back({p + "wqkv", (h + bias) * qkv_out});
    params.push_back({p + "wo", LocalQWidth(s) * h + bias * h});
    params.push_back({p + "norm2", norm});
    params.push_back({p + "fc1", (h + bias) * Fc1Width(s)});
    params.push_back({p + "fc2", LocalFfn(s) * h + bias * h});
  }
  params.push_back({"final_norm", norm});
  if (!s.arch.tied_embedding) params.push_back({"lm_head", LocalVocab(s) * h});
  return params;
}

double TotalParameters(const ShapeSpec& spec) {
  ShapeSpec whole = spec;
  whole.tp = 1;
  double n = 0;
  for (const ParamShape& p : ParamShapes(whole)) n += static_cast<double>(p.elements);
  return n;
}

double FlopParameters(const ShapeSpec& spec) {
  ShapeSpec whole = spec;
  whole.tp = 1;
  double n = 0;
  for (const ParamShape& p : ParamShapes(whole)) {
    // Lookups are not matrix products; a tied table counts once, as the output projection.
    if (p.name == "positions" || (p.name == "embed" && !spec.arch.tied_embedding)) continue;
    n += static_cast<double>(p.elements);
  }
  return n;
}

double ModelFlopsPerStep(const ShapeSpec& s) {
  const double tokens = static_cast<double>(Tokens(s));
  const double attention = 12.0 * s.layers * s.seq * static_cast<double>(s.arch.hidden);
  return (6.0 * FlopParameters(s) + attention) * tokens / s.tp;
}

}  // namespace chameleon::train_sim
