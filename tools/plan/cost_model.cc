#include "cost_model.h"

#include <algorithm>

namespace chameleon::plan {

const char* OpGroupName(int group) {
  static const char* const kNames[kOpGroups] = {"attn-proj", "attn-core", "mlp"};
  return kNames[group];
}

LayerCost CostOfLayer(const ModelSpec& m, int layer) {
  const double s = m.seq;
  const double b = m.micro_batch;
  const double h = m.hidden;
  const double f = m.ffn;
  const double tokens = s * b;
  const double kv = h * m.kv_heads / m.heads;
  const bool moe = m.IsMoeLayer(layer);
  const double visits = moe ? m.top_k : 1;  // experts each token passes through
  const double ffn_matrices = m.gated_ffn ? 3 : 2;
  LayerCost c;
  c.forward_flops[0] = 2 * tokens * (2 * h * h + 2 * h * kv);
  c.forward_flops[1] = 4 * b * s * s * h;
  c.forward_flops[2] = 2 * tokens * ffn_matrices * h * f * visits;
  c.activation_bytes[0] = 7 * tokens * h;
  c.activation_bytes[1] = 6 * tokens * h;
  c.activation_bytes[2] = 5 * tokens * h + 2 * ffn_matrices * tokens * f * visits;
  c.kept_when_recomputed = 2 * tokens * h;
  c.params = LayerParams(m, layer);
  return c;
}

double KeptActivation(const LayerCost& cost, unsigned mask) {
  double kept = 0;
  for (int g = 0; g < kOpGroups; ++g) {
    const bool recompute = (mask >> g) & 1U;
    kept += recompute ? std::min(cost.kept_when_recomputed, cost.activation_bytes[g])
                      : cost.activation_bytes[g];
  }
  return kept;
}

double TrainingFlops(const LayerCost& cost, unsigned mask) {
  double flops = 0;
  for (int g = 0; g < kOpGroups; ++g) {
    flops += 3 * cost.forward_flops[g] + (((mask >> g) & 1U) ? cost.forward_flops[g] : 0);
  }
  return flops;
}

const char* DataflowName(Dataflow d) {
  switch (d) {
    case Dataflow::kOutputStationary:
      return "output-stationary";
    case Dataflow::kWeightStationary:
      return "weight-stationary";
    case Dataflow::kInputStationary:
      return "input-stationary";
  }
  return "?";
}

GemmDataflow ChooseDataflow(std::string op, double s, double h, double k, int n, int m) {
  GemmDataflow g{std::move(op), s, h, k};
  const double base = s * h * k;
  const double grid = (n - 1) + (m - 1);
  g.ema = {base * (grid + h - 1), base * (grid + s - 1), base * (grid + k - 1)};
  const auto best = std::min_element(g.ema.begin(), g.ema.end()) - g.ema.begin();
  g.choice = static_cast<Dataflow>(best);
  return g;
}

std::vector<GemmDataflow> LayerDataflows(const ModelSpec& m, int dies) {
  const double t = static_cast<double>(m.seq) * m.micro_batch;
  const double h = m.hidden;
  const double kv = h * m.kv_heads / m.heads;
  const double ffn_out = m.gated_ffn ? 2.0 * m.ffn : m.ffn;
  return {ChooseDataflow("qkv", t, h, h + 2 * kv, dies, 1),
          ChooseDataflow("attn-out", t, h, h, dies, 1),
          ChooseDataflow("ffn-in", t, h, ffn_out, dies, 1),
          ChooseDataflow("ffn-out", t, m.ffn, h, dies, 1)};
}

}  // namespace chameleon::plan
