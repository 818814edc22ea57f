// What one transformer layer costs per micro-batch: forward FLOPs, activation bytes kept for
// the backward pass, and what recomputation saves, for three recomputable operator groups.
// Also the tensor-parallel dataflow choice per GEMM by external-memory-access (EMA) cost.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "model.h"

namespace chameleon::plan {

/// The operators one recomputation bit covers. Activation split (bf16, flash attention, after
/// Korthikanti et al. 2022, whose total is 34·s·b·h for a dense layer with FFN 4h):
/// attention projections 7·sbh (norm input, QKV input, projection input, dropout mask),
/// attention core 6·sbh (Q, K, V), MLP 5·sbh + 4·sbF (6·sbF gated; × top-k for MoE).
enum class OpGroup : int { kAttnLinear = 0, kAttnCore = 1, kMlp = 2 };
inline constexpr int kOpGroups = 3;
const char* OpGroupName(int group);

struct LayerCost {
  std::array<double, kOpGroups> forward_flops{};  ///< per micro-batch
  std::array<double, kOpGroups> activation_bytes{};
  double kept_when_recomputed = 0;  ///< a recomputed group still keeps its input, 2·sbh
  double params = 0;
};

LayerCost CostOfLayer(const ModelSpec& m, int layer);

/// Bytes of activation of `cost` kept under recomputation mask `mask` (bit g = group g).
double KeptActivation(const LayerCost& cost, unsigned mask);
/// FLOPs of forward + backward (2× forward) + recomputed forwards under `mask`.
double TrainingFlops(const LayerCost& cost, unsigned mask);

enum class Dataflow { kOutputStationary, kWeightStationary, kInputStationary };
const char* DataflowName(Dataflow d);

/// One GEMM of a layer, S × H by H × K on an n × m grid of dies, with its chosen dataflow.
struct GemmDataflow {
  std::string op;
  double s = 0, h = 0, k = 0;
  Dataflow choice = Dataflow::kOutputStationary;
  std::array<double, 3> ema{};  ///< OS, WS, IS, in elements
};

/// EMA_OS = S·H·K·(n−1 + m−1 + H−1) and EMA_WS = S·H·K·(n−1 + S−1 + m−1) are WATOS's; we
/// derived EMA_IS = S·H·K·(n−1 + m−1 + K−1) the same way (the stationary operand is never
/// re-fetched, the other two dimensions' operands stream past it). The least EMA wins.
GemmDataflow ChooseDataflow(std::string op, double s, double h, double k, int n, int m);
/// The four GEMMs of a dense layer (QKV, projection, FFN in, FFN out) on `dies` dies (n × 1).
std::vector<GemmDataflow> LayerDataflows(const ModelSpec& m, int dies);

}  // namespace chameleon::plan
