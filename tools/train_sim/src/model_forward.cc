// Forward pass. Activations are allocated as ops produce them and freed as soon as nothing needs
// them: with keep = true (normal training) a layer keeps what its backward reads; with
// keep = false (the --recompute forward) only the layer input survives, and backward runs the
// layer again with keep = true. Same kernels on the same inputs give the same bits, so
// --recompute changes memory and time, never results.
#include "model.h"

namespace chameleon::train_sim {

void Model::ForwardBackward(const Tensor& tokens, const Tensor& targets, const Tensor& loss,
                            bool aux) {
  const std::int32_t n = rows_, s = config_.seq, h = config_.hidden, v = config_.vocab;
  acts_.assign(config_.layers, LayerActs{});
  acts_[0].x_in = Alloc(static_cast<std::size_t>(n) * h);
  launcher_.Launch(KernelId::kEmbedFwd, tokens.ptr, G(kWte).value.ptr, G(kWpe).value.ptr,
                   acts_[0].x_in.ptr, n, s, h);
  for (int l = 0; l < config_.layers; ++l) {
    Tensor x_out = LayerForward(l, acts_[l], !config_.recompute);
    if (l + 1 < config_.layers) {
      acts_[l + 1].x_in = x_out;
    } else {
      x_final_ = x_out;
    }
  }
  HeadForward(targets, loss, aux);
  HeadBackward(targets, aux);
  for (int l = config_.layers - 1; l >= 0; --l) LayerBackward(l, acts_[l]);
  launcher_.Launch(KernelId::kEmbedBwd, tokens.ptr, dres_.ptr, Grad(G(kWte)), Grad(G(kWpe)), n, s,
                   h, v);
  alloc_.Free(dres_);
}

Tensor Model::LayerForward(int l, LayerActs& a, bool keep) {
  const std::int32_t n = rows_, h = config_.hidden;
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  auto drop = [&](Tensor& t) {
    if (!keep) alloc_.Free(t);
  };
  // Attention block.
  a.ln1 = Alloc(nh);
  a.ln1_stats = Alloc(2 * static_cast<std::size_t>(n));
  launcher_.Launch(KernelId::kLayerNormFwd, a.x_in.ptr, P(l, kLn1G).value.ptr,
                   P(l, kLn1B).value.ptr, a.ln1.ptr, a.ln1_stats.ptr, n, h);
  a.qkv = Alloc(3 * nh);
  launcher_.Launch(KernelId::kLinearFwd, a.ln1.ptr, P(l, kWqkv).value.ptr, P(l, kBqkv).value.ptr,
                   a.qkv.ptr, n, h, 3 * h);
  drop(a.ln1);
  drop(a.ln1_stats);
  a.probs =
      Alloc(static_cast<std::size_t>(config_.batch) * config_.heads * config_.seq * config_.seq);
  a.att = Alloc(nh);
  launcher_.Launch(KernelId::kAttentionFwd, a.qkv.ptr, a.probs.ptr, a.att.ptr, config_.batch,
                   config_.seq, config_.heads, config_.head_dim);
  drop(a.qkv);
  drop(a.probs);
  Tensor proj = Alloc(nh);
  launcher_.Launch(KernelId::kLinearFwd, a.att.ptr, P(l, kWproj).value.ptr, P(l, kBproj).value.ptr,
                   proj.ptr, n, h, h);
  drop(a.att);
  a.x_mid = Alloc(nh);
  launcher_.Launch(KernelId::kAdd, a.x_in.ptr, proj.ptr, a.x_mid.ptr,
                   static_cast<std::int32_t>(nh));
  alloc_.Free(proj);
  // MLP block.
  a.ln2 = Alloc(nh);
  a.ln2_stats = Alloc(2 * static_cast<std::size_t>(n));
  launcher_.Launch(KernelId::kLayerNormFwd, a.x_mid.ptr, P(l, kLn2G).value.ptr,
                   P(l, kLn2B).value.ptr, a.ln2.ptr, a.ln2_stats.ptr, n, h);
  a.fc = Alloc(4 * nh);
  launcher_.Launch(KernelId::kLinearFwd, a.ln2.ptr, P(l, kWfc).value.ptr, P(l, kBfc).value.ptr,
                   a.fc.ptr, n, h, 4 * h);
  drop(a.ln2);
  drop(a.ln2_stats);
  a.gelu = Alloc(4 * nh);
  launcher_.Launch(KernelId::kGeluFwd, a.fc.ptr, a.gelu.ptr, static_cast<std::int32_t>(4 * nh));
  drop(a.fc);
  Tensor fc2 = Alloc(nh);
  launcher_.Launch(KernelId::kLinearFwd, a.gelu.ptr, P(l, kWfc2).value.ptr, P(l, kBfc2).value.ptr,
                   fc2.ptr, n, 4 * h, h);
  drop(a.gelu);
  Tensor x_out = Alloc(nh);
  launcher_.Launch(KernelId::kAdd, a.x_mid.ptr, fc2.ptr, x_out.ptr, static_cast<std::int32_t>(nh));
  alloc_.Free(fc2);
  drop(a.x_mid);
  return x_out;
}

void Model::HeadForward(const Tensor& targets, const Tensor& loss, bool aux) {
  const std::int32_t n = rows_, h = config_.hidden, v = config_.vocab;
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  lnf_ = Alloc(nh);
  lnf_stats_ = Alloc(2 * static_cast<std::size_t>(n));
  launcher_.Launch(KernelId::kLayerNormFwd, x_final_.ptr, G(kLnfG).value.ptr, G(kLnfB).value.ptr,
                   lnf_.ptr, lnf_stats_.ptr, n, h);
  logits_ = Alloc(static_cast<std::size_t>(n) * v);
  launcher_.Launch(KernelId::kLinearFwd, lnf_.ptr, G(kWout).value.ptr, CUdeviceptr{0}, logits_.ptr,
                   n, h, v);
  launcher_.Launch(KernelId::kCrossEntropyFwd, logits_.ptr, targets.ptr, loss.ptr, n, v);
  if (!aux) return;
  aux_pre_ = Alloc(nh);
  launcher_.Launch(KernelId::kLinearFwd, lnf_.ptr, Aux().value.ptr, CUdeviceptr{0}, aux_pre_.ptr, n,
                   h, h);
  aux_act_ = Alloc(nh);
  launcher_.Launch(KernelId::kGeluFwd, aux_pre_.ptr, aux_act_.ptr, static_cast<std::int32_t>(nh));
  launcher_.Launch(KernelId::kSquareLossFwd, aux_act_.ptr, loss.ptr, static_cast<std::int32_t>(nh),
                   kAuxLossWeight);
}

}  // namespace chameleon::train_sim
