// Backward pass. dres_ holds the gradient of the residual stream and is updated in place as the
// layers are walked in reverse; each saved activation is freed right after its last use, so
// memory falls steadily from its peak at the start of backward.
#include "model.h"

namespace chameleon::train_sim {

void Model::LinearBackward(const Tensor& dout, const Tensor& in, Param& w, Param* bias,
                           const Tensor& din, int in_dim, int out_dim) {
  launcher_.Launch(KernelId::kLinearBwdInput, dout.ptr, w.value.ptr, din.ptr, rows_,
                   std::int32_t{in_dim}, std::int32_t{out_dim});
  const CUdeviceptr dbias = bias != nullptr ? Grad(*bias) : CUdeviceptr{0};
  launcher_.Launch(KernelId::kLinearBwdWeight, in.ptr, dout.ptr, Grad(w), dbias, rows_,
                   std::int32_t{in_dim}, std::int32_t{out_dim});
}

void Model::LayerNormBackward(const Tensor& dout, const Tensor& x, const Tensor& stats,
                              Param& gamma, Param& beta, const Tensor& dx, bool accumulate) {
  launcher_.Launch(KernelId::kLayerNormBwd, dout.ptr, x.ptr, stats.ptr, gamma.value.ptr, dx.ptr,
                   Grad(gamma), Grad(beta), rows_, std::int32_t{config_.hidden},
                   std::int32_t{accumulate ? 1 : 0});
}

void Model::HeadBackward(const Tensor& targets, bool aux) {
  const std::int32_t n = rows_, h = config_.hidden, v = config_.vocab;
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  Tensor dlogits = Alloc(static_cast<std::size_t>(n) * v);
  launcher_.Launch(KernelId::kCrossEntropyBwd, logits_.ptr, targets.ptr, dlogits.ptr, n, v);
  alloc_.Free(logits_);
  Tensor dlnf = Alloc(nh);
  LinearBackward(dlogits, lnf_, G(kWout), nullptr, dlnf, h, v);
  alloc_.Free(dlogits);
  if (aux) {
    Tensor dact = Alloc(nh);
    launcher_.Launch(KernelId::kSquareLossBwd, aux_act_.ptr, dact.ptr,
                     static_cast<std::int32_t>(nh), kAuxLossWeight);
    alloc_.Free(aux_act_);
    Tensor dpre = Alloc(nh);
    launcher_.Launch(KernelId::kGeluBwd, aux_pre_.ptr, dact.ptr, dpre.ptr,
                     static_cast<std::int32_t>(nh));
    alloc_.Free(aux_pre_);
    alloc_.Free(dact);
    Tensor dlnf_aux = Alloc(nh);
    LinearBackward(dpre, lnf_, Aux(), nullptr, dlnf_aux, h, h);
    alloc_.Free(dpre);
    launcher_.Launch(KernelId::kAddInPlace, dlnf.ptr, dlnf_aux.ptr, static_cast<std::int32_t>(nh));
    alloc_.Free(dlnf_aux);
  }
  alloc_.Free(lnf_);
  dres_ = Alloc(nh);
  LayerNormBackward(dlnf, x_final_, lnf_stats_, G(kLnfG), G(kLnfB), dres_, false);
  alloc_.Free(dlnf);
  alloc_.Free(lnf_stats_);
  alloc_.Free(x_final_);
}

void Model::LayerBackward(int l, LayerActs& a) {
  const std::int32_t n = rows_, h = config_.hidden;
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  if (config_.recompute) {
    // Checkpointing: run the layer again from its saved input, keeping everything this time.
    // Its output is the next layer's input, already consumed by that layer's backward.
    Tensor x_out = LayerForward(l, a, true);
    alloc_.Free(x_out);
  }
  // MLP block: dres_ is d(x_out); afterwards it is d(x_mid).
  Tensor dgelu = Alloc(4 * nh);
  LinearBackward(dres_, a.gelu, P(l, kWfc2), &P(l, kBfc2), dgelu, 4 * h, h);
  alloc_.Free(a.gelu);
  Tensor dfc = Alloc(4 * nh);
  launcher_.Launch(KernelId::kGeluBwd, a.fc.ptr, dgelu.ptr, dfc.ptr,
                   static_cast<std::int32_t>(4 * nh));
  alloc_.Free(a.fc);
  alloc_.Free(dgelu);
  Tensor dln2 = Alloc(nh);
  LinearBackward(dfc, a.ln2, P(l, kWfc), &P(l, kBfc), dln2, h, 4 * h);
  alloc_.Free(a.ln2);
  alloc_.Free(dfc);
  LayerNormBackward(dln2, a.x_mid, a.ln2_stats, P(l, kLn2G), P(l, kLn2B), dres_, true);
  alloc_.Free(dln2);
  alloc_.Free(a.x_mid);
  alloc_.Free(a.ln2_stats);
  // Attention block: dres_ becomes d(x_in).
  Tensor datt = Alloc(nh);
  LinearBackward(dres_, a.att, P(l, kWproj), &P(l, kBproj), datt, h, h);
  alloc_.Free(a.att);
  Tensor dqkv = Alloc(3 * nh);
  Tensor scratch = Alloc(static_cast<std::size_t>(config_.seq) * config_.seq);
  launcher_.Launch(KernelId::kAttentionBwd, datt.ptr, a.qkv.ptr, a.probs.ptr, dqkv.ptr, scratch.ptr,
                   std::int32_t{config_.batch}, std::int32_t{config_.seq},
                   std::int32_t{config_.heads}, std::int32_t{config_.head_dim});
  alloc_.Free(scratch);
  alloc_.Free(datt);
  alloc_.Free(a.probs);
  alloc_.Free(a.qkv);
  Tensor dln1 = Alloc(nh);
  LinearBackward(dqkv, a.ln1, P(l, kWqkv), &P(l, kBqkv), dln1, h, 3 * h);
  alloc_.Free(a.ln1);
  alloc_.Free(dqkv);
  LayerNormBackward(dln1, a.x_in, a.ln1_stats, P(l, kLn1G), P(l, kLn1B), dres_, true);
  alloc_.Free(dln1);
  alloc_.Free(a.ln1_stats);
  alloc_.Free(a.x_in);
}

}  // namespace chameleon::train_sim
