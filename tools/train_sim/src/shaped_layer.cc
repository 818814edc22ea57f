// One transformer layer of the model-shaped network, forward and backward, in Megatron's
// tensor-parallel layout: QKV and fc1 split by columns, the output projection and fc2 by rows,
// with a collective where each parallel region is entered and left (docs/trainer.md).
#include "shaped_model.h"

namespace chameleon::train_sim {

using namespace detail;

namespace {

// Elementwise costs are HBM bytes; FLOPs per element are small and never the bound.
constexpr double kNormFlopsPerElement = 8;

}  // namespace

void ShapedModel::LayerForward(int l, bool keep) {
  LayerActivations& a = acts_[static_cast<std::size_t>(l)];
  const Tensor& x = resid_[static_cast<std::size_t>(l)];
  const double tokens = static_cast<double>(Tokens(spec_));
  const double outer = OuterBytes();
  const double qkv = static_cast<double>(LocalQWidth(spec_) + 2 * LocalKvWidth(spec_));
  const double q_width = static_cast<double>(LocalQWidth(spec_));
  const double fc1 = static_cast<double>(Fc1Width(spec_));
  const double ffn = static_cast<double>(LocalFfn(spec_));
  const std::size_t kv_bytes = 2 * Tokens(spec_) * LocalKvWidth(spec_);
  const std::size_t mask_bytes = OuterRows(spec_) * spec_.arch.hidden;

  a.norm1_out = Alloc(static_cast<std::size_t>(outer));
  Run(Tag(l, kNorm1Fwd), {x, LayerParam(l, kNorm1).weight}, {a.norm1_out},
      cost::Memory(2 * outer, kNormFlopsPerElement * outer / 2));
  Tensor gathered = Gather(Tag(l, kGather1), a.norm1_out);
  a.q = Alloc(2 * Tokens(spec_) * LocalQWidth(spec_));
  a.k = Alloc(kv_bytes);
  a.v = Alloc(kv_bytes);
  Run(Tag(l, kQkvFwd), {gathered, LayerParam(l, kQkv).weight}, {a.q, a.k, a.v},
      cost::Gemm(tokens, h_, qkv));
  DropGathered(gathered, a.norm1_out);
  AttentionForward(l, a);
  Tensor proj = Alloc(static_cast<std::size_t>(FullBytes()));
  Run(Tag(l, kProjFwd), {a.context, LayerParam(l, kWo).weight}, {proj},
      cost::Gemm(tokens, q_width, h_));
  Tensor reduced = Reduce(Tag(l, kReduce1), proj);
  if (spec_.arch.dropout) a.attn_mask = Alloc(mask_bytes);
  a.x_mid = Alloc(static_cast<std::size_t>(outer));
  Run(Tag(l, kResid1Fwd), {x, reduced}, {a.x_mid, a.attn_mask}, cost::Memory(3.5 * outer));
  Free(reduced);

  a.norm2_out = Alloc(static_cast<std::size_t>(outer));
  Run(Tag(l, kNorm2Fwd), {a.x_mid, LayerParam(l, kNorm2).weight}, {a.norm2_out},
      cost::Memory(2 * outer, kNormFlopsPerElement * outer / 2));
  gathered = Gather(Tag(l, kGather2), a.norm2_out);
  a.fc1_out = Alloc(static_cast<std::size_t>(2 * tokens * fc1));
  Run(Tag(l, kFc1Fwd), {gathered, LayerParam(l, kFc1).weight}, {a.fc1_out},
      cost::Gemm(tokens, h_, fc1));
  DropGathered(gathered, a.norm2_out);
  a.act_out = Alloc(static_cast<std::size_t>(2 * tokens * ffn));
  Run(Tag(l, kActFwd), {a.fc1_out}, {a.act_out},
      cost::Memory(2 * tokens * (fc1 + ffn), 8 * tokens * ffn));
  Tensor fc2 = Alloc(static_cast<std::size_t>(FullBytes()));
  Run(Tag(l, kFc2Fwd), {a.act_out, LayerParam(l, kFc2).weight}, {fc2}, cost::Gemm(tokens, ffn, h_));
  reduced = Reduce(Tag(l, kReduce2), fc2);
  if (spec_.arch.dropout) a.mlp_mask = Alloc(mask_bytes);
  Tensor& out = resid_[static_cast<std::size_t>(l) + 1];
  out = Alloc(static_cast<std::size_t>(outer));
  Run(Tag(l, kResid2Fwd), {a.x_mid, reduced}, {out, a.mlp_mask}, cost::Memory(3.5 * outer));
  Free(reduced);
  // Full activation checkpointing keeps only each layer's input; backward recomputes the rest.
  if (!keep) FreeLayer(a);
}

void ShapedModel::AttentionForward(int l, LayerActivations& a) {
  const double bh = static_cast<double>(spec_.micro_batch) * LocalHeads(spec_);
  const double s = spec_.seq, hd = HeadDim(spec_);
  a.context = Alloc(a.q.bytes);
  if (spec_.flash_attention) {
    const double qkv_bytes = static_cast<double>(a.q.bytes + a.k.bytes + a.v.bytes);
    // FlashAttention-2 with the causal mask skips the upper triangle: half of QK^T and PV.
    Run(Tag(l, kAttnFwd), {a.q, a.k, a.v}, {a.context},
        {0.5 * 4 * bh * s * s * hd, qkv_bytes + a.context.bytes, 0});
    return;
  }
  // Unfused: the full score matrix is computed and masked (Korthikanti's accounting).
  const std::size_t scores_bytes = static_cast<std::size_t>(2 * bh * s * s);
  Tensor scores = Alloc(scores_bytes);
  Run(Tag(l, kScoresFwd), {a.q, a.k}, {scores},
      {2 * bh * s * s * hd, static_cast<double>(a.q.bytes + a.k.bytes + scores_bytes), 0});
  a.softmax = Alloc(scores_bytes);
  Run(Tag(l, kSoftmaxFwd), {scores}, {a.softmax}, cost::Memory(2.0 * scores_bytes));
  Free(scores);
  Tensor probs = a.softmax;
  if (spec_.arch.dropout) {
    a.softmax_mask = Alloc(scores_bytes / 2);
    a.softmax_dropped = Alloc(scores_bytes);
    Run(Tag(l, kProbDropFwd), {a.softmax}, {a.softmax_mask, a.softmax_dropped},
        cost::Memory(2.5 * scores_bytes));
    probs = a.softmax_dropped;
  }
  Run(Tag(l, kAvFwd), {probs, a.v}, {a.context},
      {2 * bh * s * s * hd, static_cast<double>(scores_bytes + a.v.bytes + a.context.bytes), 0});
}

void ShapedModel::FreeLayer(LayerActivations& a) {
  for (Tensor* t :
       {&a.norm1_out, &a.q, &a.k, &a.v, &a.softmax, &a.softmax_mask, &a.softmax_dropped, &a.context,
        &a.attn_mask, &a.x_mid, &a.norm2_out, &a.fc1_out, &a.act_out, &a.mlp_mask}) {
    Free(*t);
  }
}

Tensor ShapedModel::LayerBackward(int l, Tensor dx_out) {
  LayerActivations& a = acts_[static_cast<std::size_t>(l)];
  if (recompute_) {
    // Recomputed forward: same tags and step, hence the same values; its output is not needed.
    LayerForward(l, /*keep=*/true);
    Free(resid_[static_cast<std::size_t>(l) + 1]);
  }
  const double tokens = static_cast<double>(Tokens(spec_));
  const double outer = OuterBytes();
  const double qkv = static_cast<double>(LocalQWidth(spec_) + 2 * LocalKvWidth(spec_));
  const double q_width = static_cast<double>(LocalQWidth(spec_));

  Tensor dx_mid = MlpBackward(l, a, dx_out);
  Free(dx_out);

  // Attention block: dropout, output projection, attention, QKV, first norm.
  Tensor d_proj = Alloc(static_cast<std::size_t>(outer));
  Run(Tag(l, kResid1Bwd), {dx_mid, a.attn_mask}, {d_proj}, cost::Memory(2.5 * outer));
  Free(a.attn_mask);
  Tensor d_proj_full = Gather(Tag(l, kGatherProjGrad), d_proj);
  Tensor d_context = Alloc(a.context.bytes);
  ShapedParam& wo = LayerParam(l, kWo);
  Run(Tag(l, kProjDgrad), {d_proj_full, wo.weight}, {d_context}, cost::Gemm(tokens, h_, q_width));
  const Tensor wo_before = AllocGrad(wo);
  Run(Tag(l, kProjWgrad), {a.context, d_proj_full, wo_before}, {wo.grad},
      cost::Gemm(q_width, tokens, h_));
  DropGathered(d_proj_full, d_proj);
  Free(d_proj);
  Tensor dq = Alloc(a.q.bytes), dk = Alloc(a.k.bytes), dv = Alloc(a.v.bytes);
  AttentionBackward(l, a, d_context, dq, dk, dv);
  Tensor d_norm1_full = Alloc(static_cast<std::size_t>(FullBytes()));
  ShapedParam& wqkv = LayerParam(l, kQkv);
  Run(Tag(l, kQkvDgrad), {dq, dk, dv, wqkv.weight}, {d_norm1_full}, cost::Gemm(tokens, qkv, h_));
  // Sequence parallelism keeps the norm output sharded and gathers it again for the weight
  // gradient (Korthikanti et al., section 4.2.2).
  Tensor gathered = Gather(Tag(l, kRegather1), a.norm1_out);
  const Tensor wqkv_before = AllocGrad(wqkv);
  Run(Tag(l, kQkvWgrad), {gathered, dq, dk, dv, wqkv_before}, {wqkv.grad},
      cost::Gemm(h_, tokens, qkv));
  DropGathered(gathered, a.norm1_out);
  for (Tensor* t : {&dq, &dk, &dv, &a.q, &a.k, &a.v}) Free(*t);
  Tensor d_norm1 = Reduce(Tag(l, kReduceNorm1Grad), d_norm1_full);
  Tensor& x = resid_[static_cast<std::size_t>(l)];
  Tensor dx_in = Alloc(static_cast<std::size_t>(outer));
  ShapedParam& norm1 = LayerParam(l, kNorm1);
  const Tensor norm1_before = AllocGrad(norm1);
  Run(Tag(l, kNorm1Bwd), {x, d_norm1, dx_mid, norm1.weight, norm1_before}, {dx_in, norm1.grad},
      cost::Memory(5 * outer, 14 * outer / 2));
  for (Tensor* t : {&d_norm1, &a.norm1_out, &dx_mid, &x}) Free(*t);
  return dx_in;
}

// MLP block and second norm; returns the gradient of the layer's middle residual (x_mid).
Tensor ShapedModel::MlpBackward(int l, LayerActivations& a, const Tensor& dx_out) {
  const double tokens = static_cast<double>(Tokens(spec_));
  const double outer = OuterBytes();
  const double fc1 = static_cast<double>(Fc1Width(spec_));
  const double ffn = static_cast<double>(LocalFfn(spec_));
  Tensor d_fc2 = Alloc(static_cast<std::size_t>(outer));
  Run(Tag(l, kResid2Bwd), {dx_out, a.mlp_mask}, {d_fc2}, cost::Memory(2.5 * outer));
  Free(a.mlp_mask);
  Tensor d_fc2_full = Gather(Tag(l, kGatherFc2Grad), d_fc2);
  Tensor d_act = Alloc(a.act_out.bytes);
  ShapedParam& w_fc2 = LayerParam(l, kFc2);
  Run(Tag(l, kFc2Dgrad), {d_fc2_full, w_fc2.weight}, {d_act}, cost::Gemm(tokens, h_, ffn));
  const Tensor fc2_before = AllocGrad(w_fc2);
  Run(Tag(l, kFc2Wgrad), {a.act_out, d_fc2_full, fc2_before}, {w_fc2.grad},
      cost::Gemm(ffn, tokens, h_));
  DropGathered(d_fc2_full, d_fc2);
  Free(d_fc2);
  Free(a.act_out);
  Tensor d_fc1 = Alloc(a.fc1_out.bytes);
  Run(Tag(l, kActBwd), {a.fc1_out, d_act}, {d_fc1},
      cost::Memory(2 * tokens * (2 * fc1 + ffn), 12 * tokens * ffn));
  Free(a.fc1_out);
  Free(d_act);
  Tensor d_norm2_full = Alloc(static_cast<std::size_t>(FullBytes()));
  ShapedParam& w_fc1 = LayerParam(l, kFc1);
  Run(Tag(l, kFc1Dgrad), {d_fc1, w_fc1.weight}, {d_norm2_full}, cost::Gemm(tokens, fc1, h_));
  Tensor gathered = Gather(Tag(l, kRegather2), a.norm2_out);
  const Tensor fc1_before = AllocGrad(w_fc1);
  Run(Tag(l, kFc1Wgrad), {gathered, d_fc1, fc1_before}, {w_fc1.grad}, cost::Gemm(h_, tokens, fc1));
  DropGathered(gathered, a.norm2_out);
  Free(d_fc1);
  Tensor d_norm2 = Reduce(Tag(l, kReduceNorm2Grad), d_norm2_full);
  Tensor dx_mid = Alloc(static_cast<std::size_t>(outer));
  ShapedParam& norm2 = LayerParam(l, kNorm2);
  const Tensor norm2_before = AllocGrad(norm2);
  // The residual: dx_mid = dx_out + the norm's input gradient, in the same kernel.
  Run(Tag(l, kNorm2Bwd), {a.x_mid, d_norm2, dx_out, norm2.weight, norm2_before},
      {dx_mid, norm2.grad}, cost::Memory(5 * outer, 14 * outer / 2));
  for (Tensor* t : {&d_norm2, &a.norm2_out, &a.x_mid}) Free(*t);
  return dx_mid;
}

void ShapedModel::AttentionBackward(int l, LayerActivations& a, Tensor& d_context, Tensor& dq,
                                    Tensor& dk, Tensor& dv) {
  const double bh = static_cast<double>(spec_.micro_batch) * LocalHeads(spec_);
  const double s = spec_.seq, hd = HeadDim(spec_);
  if (spec_.flash_attention) {
    const double qkv_bytes = static_cast<double>(a.q.bytes + a.k.bytes + a.v.bytes);
    // FlashAttention-2 backward recomputes the scores: five causal-halved s x s products
    // (QK^T, dV, dP, dQ, dK) against the forward's two.
    Run(Tag(l, kAttnBwd), {d_context, a.q, a.k, a.v, a.context}, {dq, dk, dv},
        {0.5 * 10 * bh * s * s * hd, 2 * qkv_bytes + 2.0 * a.context.bytes, 0});
    Free(a.context);
    Free(d_context);
    return;
  }
  Free(a.context);
  const std::size_t scores_bytes = a.softmax.bytes;
  Tensor probs = spec_.arch.dropout ? a.softmax_dropped : a.softmax;
  Tensor d_probs = Alloc(scores_bytes);
  Run(Tag(l, kAvBwd), {d_context, probs, a.v}, {d_probs, dv},
      {4 * bh * s * s * hd,
       2.0 * scores_bytes + 2 * static_cast<double>(a.v.bytes) +
           static_cast<double>(d_context.bytes),
       0});
  Free(d_context);
  Free(a.softmax_dropped);
  if (spec_.arch.dropout) {
    Run(Tag(l, kProbDropBwd), {d_probs, a.softmax_mask}, {d_probs},
        cost::Memory(2.5 * scores_bytes));
    Free(a.softmax_mask);
  }
  Run(Tag(l, kSoftmaxBwd), {d_probs, a.softmax}, {d_probs}, cost::Memory(3.0 * scores_bytes));
  Free(a.softmax);
  Run(Tag(l, kScoresBwd), {d_probs, a.q, a.k}, {dq, dk},
      {4 * bh * s * s * hd, scores_bytes + 2 * static_cast<double>(a.q.bytes + a.k.bytes), 0});
  Free(d_probs);
}

}  // namespace chameleon::train_sim
