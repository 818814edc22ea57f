// Parameters, optimizer, embedding, head and loss of the model-shaped network; the layers are
// in shaped_layer.cc.
#include <algorithm>
#include <stdexcept>

#include "shaped_model.h"

namespace chameleon::train_sim {

using namespace detail;
using cost::Cost;

namespace {

constexpr std::uint32_t kInitTag = 0x40000000u;  // | parameter index
constexpr std::uint32_t kAdamTag = 0x20000000u;  // | parameter index
constexpr std::size_t kAuxBytes = 8;

}  // namespace

ShapedModel::ShapedModel(const ShapeSpec& spec, bool recompute, Allocator& alloc,
                         SampledLauncher& launcher, const StageSlice& slice)
    : spec_(spec),
      recompute_(recompute),
      slice_(slice),
      alloc_(alloc),
      launcher_(launcher),
      h_(static_cast<double>(spec.arch.hidden)),
      resid_(static_cast<std::size_t>(spec.layers) + 1),
      acts_(static_cast<std::size_t>(spec.layers)) {
  if (slice_.end_layer < 0) slice_.end_layer = spec_.layers;
  // A slice is contiguous in ParamShapes' order: embedding, layers, final norm and head.
  if (slice_.first_layer < 0 || slice_.first_layer > slice_.end_layer ||
      slice_.end_layer > spec_.layers || slice_.embedding != (slice_.first_layer == 0) ||
      slice_.head != (slice_.end_layer == spec_.layers) ||
      (spec_.arch.tied_embedding && !(slice_.embedding && slice_.head))) {
    throw std::logic_error("train-sim bug: invalid stage slice");
  }
  const std::size_t prefix = spec_.arch.learned_positions ? 2 : 1;
  const std::vector<ParamShape> shapes = ParamShapes(spec_);
  param_base_ =
      slice_.embedding ? 0 : prefix + static_cast<std::size_t>(slice_.first_layer) * kSlots;
  const std::size_t end =
      slice_.head ? shapes.size() : prefix + static_cast<std::size_t>(slice_.end_layer) * kSlots;
  for (std::size_t i = param_base_; i < end; ++i) {
    ShapedParam p;
    p.name = shapes[i].name;
    p.elements = shapes[i].elements;
    params_.push_back(std::move(p));
  }
}

ShapedParam& ShapedModel::LayerParam(int layer, Slot slot) {
  const std::size_t first = !slice_.embedding ? 0 : spec_.arch.learned_positions ? 2 : 1;
  return params_[first + static_cast<std::size_t>(layer - slice_.first_layer) * kSlots + slot];
}

// The output projection: its own matrix, or the embedding table when tied (GPT-2).
ShapedParam& ShapedModel::Head() {
  return spec_.arch.tied_embedding ? params_.front() : params_.back();
}

ShapedParam& ShapedModel::FinalNorm() {
  return params_[params_.size() - (spec_.arch.tied_embedding ? 1 : 2)];
}

void ShapedModel::Run(std::uint32_t tag, std::initializer_list<Tensor> in,
                      std::initializer_list<Tensor> out, const Cost& c) {
  SampledOp op;
  op.tag = tag;
  if (in.size() > op.in.size() || out.size() > op.out.size()) {
    throw std::logic_error("train-sim bug: too many tensors for one sampled op");
  }
  std::copy(in.begin(), in.end(), op.in.begin());
  std::copy(out.begin(), out.end(), op.out.begin());
  op.flops = c.flops;
  op.bytes = c.bytes;
  op.link_bytes = c.link_bytes;
  launcher_.Launch(op, step_);
}

Tensor ShapedModel::AllocGrad(ShapedParam& p) {
  if (p.grad) return p.grad;
  p.grad = Alloc(2 * p.elements);
  return Tensor{};
}

Tensor ShapedModel::Gather(std::uint32_t tag, const Tensor& outer) {
  if (spec_.tp == 1 || !spec_.sequence_parallel) return outer;
  Tensor full = Alloc(static_cast<std::size_t>(FullBytes()));
  Run(tag, {outer}, {full}, cost::AllGather(FullBytes(), spec_.tp));
  return full;
}

void ShapedModel::DropGathered(Tensor& gathered, const Tensor& outer) {
  if (gathered.ptr != outer.ptr) Free(gathered);
  gathered = Tensor{};
}

Tensor ShapedModel::Reduce(std::uint32_t tag, Tensor& full) {
  Tensor result = full;
  if (spec_.tp > 1 && !spec_.sequence_parallel) {
    Run(tag, {full}, {full}, cost::AllReduce(FullBytes(), spec_.tp));
  } else if (spec_.tp > 1) {
    result = Alloc(static_cast<std::size_t>(OuterBytes()));
    Run(tag, {full}, {result}, cost::ReduceScatter(FullBytes(), spec_.tp));
    Free(full);
  }
  full = Tensor{};
  return result;
}

void ShapedModel::Init() {
  // Model construction allocates the bf16 weights; the optimizer then adds fp32 master copies
  // and both moments. One launch per parameter writes all four.
  for (ShapedParam& p : params_) p.weight = Alloc(2 * p.elements);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    ShapedParam& p = params_[i];
    p.master = Alloc(4 * p.elements);
    p.m = Alloc(4 * p.elements);
    p.v = Alloc(4 * p.elements);
    Run(kInitTag | static_cast<std::uint32_t>(param_base_ + i), {}, {p.weight, p.master, p.m, p.v},
        cost::Memory(14.0 * static_cast<double>(p.elements)));
  }
}

void ShapedModel::Forward(const Tensor& tokens, const Tensor& targets, const Tensor& loss,
                          bool aux) {
  ForwardStage({tokens, targets, loss, Tensor{}, aux});
}

Tensor ShapedModel::ForwardStage(const StageInput& in) {
  tokens_ = in.tokens;
  targets_ = in.targets;
  loss_ = in.loss;
  const double tokens_n = static_cast<double>(Tokens(spec_));
  const auto first = static_cast<std::size_t>(slice_.first_layer);
  const auto end = static_cast<std::size_t>(slice_.end_layer);
  if (slice_.embedding) {
    // Embedding: each GPU looks up its vocabulary shard, then the partial sums are reduced.
    Tensor full = Alloc(static_cast<std::size_t>(FullBytes()));
    Tensor positions = spec_.arch.learned_positions ? params_[1].weight : Tensor{};
    Run(Tag(-1, kEmbedFwd), {tokens_, params_[0].weight, positions}, {full},
        cost::Memory(4 * tokens_n + 3 * FullBytes()));
    resid_[0] = Reduce(Tag(-1, kEmbedReduce), full);
  } else {
    resid_[first] = in.input;
  }
  for (int l = slice_.first_layer; l < slice_.end_layer; ++l) LayerForward(l, /*keep=*/!recompute_);
  if (!slice_.head) {
    // The next stage's input; this stage's backward does not read it.
    const Tensor out = resid_[end];
    resid_[end] = Tensor{};
    return out;
  }

  const auto layers = end;
  normed_ = Alloc(static_cast<std::size_t>(OuterBytes()));
  Run(Tag(-1, kFinalNormFwd), {resid_[layers], FinalNorm().weight}, {normed_},
      cost::Memory(2 * OuterBytes(), 4 * OuterBytes()));
  Tensor gathered = Gather(Tag(-1, kHeadGather), normed_);
  const double vocab = static_cast<double>(LocalVocab(spec_));
  logits_ = Alloc(static_cast<std::size_t>(2 * tokens_n * vocab));
  Run(Tag(-1, kHeadFwd), {gathered, Head().weight}, {logits_}, cost::Gemm(tokens_n, h_, vocab));
  DropGathered(gathered, normed_);
  if (in.aux) {
    aux_ = Alloc(kAuxBytes);
    Run(Tag(-1, kAuxFwd), {normed_}, {aux_}, cost::Memory(OuterBytes(), OuterBytes()));
  }
  // Vocabulary-parallel cross-entropy: three all-reduces of one fp32 per token (max, sum of
  // exponentials, target logit).
  Cost ce = cost::Memory(2 * tokens_n * vocab, 5 * tokens_n * vocab);
  if (spec_.tp > 1) ce.link_bytes = 3 * cost::AllReduce(4 * tokens_n, spec_.tp).link_bytes;
  Run(Tag(-1, kLossFwd), {logits_, targets_, aux_}, {loss_}, ce);
  return Tensor{};
}

void ShapedModel::Backward() { BackwardStage(Tensor{}); }

Tensor ShapedModel::BackwardStage(Tensor d_output) {
  Tensor dx = d_output;
  if (slice_.head) dx = HeadBackward();
  for (int l = slice_.end_layer - 1; l >= slice_.first_layer; --l) dx = LayerBackward(l, dx);
  if (!slice_.embedding) return dx;  // the previous stage's gradient; its input is freed

  const double tokens_n = static_cast<double>(Tokens(spec_));
  // Embedding: scatter-add of the output gradient into the table rows of this step's tokens.
  Tensor d_embed = Gather(Tag(-1, kEmbedGather), dx);
  ShapedParam& embed = params_[0];
  // A tied table accumulates into the head's gradient (and any table into an earlier
  // micro-batch's); a fresh one is written afresh (never read: a reused block holds stale
  // bytes until written).
  const Tensor accumulate = AllocGrad(embed);
  Tensor d_positions, positions_before;
  if (spec_.arch.learned_positions) {
    positions_before = AllocGrad(params_[1]);
    d_positions = params_[1].grad;
  }
  Run(Tag(-1, kEmbedBwd), {tokens_, d_embed, accumulate, positions_before},
      {embed.grad, d_positions}, cost::Memory(4 * tokens_n + 3 * FullBytes()));
  DropGathered(d_embed, dx);
  Free(dx);
  return Tensor{};
}

// The loss, head and final norm's backward; returns the gradient of the last layer's output.
Tensor ShapedModel::HeadBackward() {
  const double tokens_n = static_cast<double>(Tokens(spec_));
  const double vocab = static_cast<double>(LocalVocab(spec_));
  Tensor dlogits = Alloc(logits_.bytes);
  Run(Tag(-1, kLossBwd), {logits_, targets_, loss_}, {dlogits},
      cost::Memory(4 * tokens_n * vocab, 5 * tokens_n * vocab));
  Free(logits_);
  Tensor d_full = Alloc(static_cast<std::size_t>(FullBytes()));
  ShapedParam& head = Head();
  Run(Tag(-1, kHeadDgrad), {dlogits, head.weight}, {d_full}, cost::Gemm(tokens_n, vocab, h_));
  Tensor gathered = Gather(Tag(-1, kHeadWgradGather), normed_);
  const Tensor head_before = AllocGrad(head);
  Run(Tag(-1, kHeadWgrad), {gathered, dlogits, head_before}, {head.grad},
      cost::Gemm(vocab, tokens_n, h_));
  DropGathered(gathered, normed_);
  Free(dlogits);
  Tensor d_normed = Reduce(Tag(-1, kHeadReduce), d_full);
  if (aux_) {
    Run(Tag(-1, kAuxBwd), {normed_, aux_, d_normed}, {d_normed},
        cost::Memory(3 * OuterBytes(), OuterBytes()));
    Free(aux_);
  }
  const auto layers = static_cast<std::size_t>(spec_.layers);
  ShapedParam& final_norm = FinalNorm();
  Tensor dx = Alloc(static_cast<std::size_t>(OuterBytes()));
  const Tensor norm_before = AllocGrad(final_norm);
  Run(Tag(-1, kFinalNormBwd), {resid_[layers], d_normed, final_norm.weight, norm_before},
      {dx, final_norm.grad}, cost::Memory(4 * OuterBytes(), 7 * OuterBytes()));
  Free(d_normed);
  Free(normed_);
  Free(resid_[layers]);
  return dx;
}

void ShapedModel::OptimizerStep(bool skip) {
  for (std::size_t i = 0; !skip && i < params_.size(); ++i) {
    ShapedParam& p = params_[i];
    // Reads the bf16 gradient, reads and writes fp32 master, m and v, writes the bf16 weight:
    // 2 + 3 * 8 + 2 = 28 bytes and about 10 FLOPs per element.
    const double n = static_cast<double>(p.elements);
    Run(kAdamTag | static_cast<std::uint32_t>(param_base_ + i), {p.grad, p.master, p.m, p.v},
        {p.master, p.m, p.v, p.weight}, cost::Memory(28 * n, 10 * n));
  }
  for (ShapedParam& p : params_) Free(p.grad);
}

void ShapedModel::Release() {
  for (ShapedParam& p : params_) {
    for (Tensor* t : {&p.weight, &p.grad, &p.master, &p.m, &p.v}) Free(*t);
  }
}

std::size_t ShapedModel::optimizer_state_bytes() const {
  std::size_t total = 0;
  for (const ShapedParam& p : params_) total += p.master.bytes + p.m.bytes + p.v.bytes;
  return total;
}

Tensor ShapedModel::CorruptionTarget() const {
  if (recompute_) return resid_.size() > 1 ? resid_[1] : Tensor{};
  const LayerActivations& a = acts_[static_cast<std::size_t>(slice_.first_layer)];
  Tensor best;
  for (const Tensor& t :
       {a.norm1_out, a.q, a.k, a.v, a.softmax, a.softmax_mask, a.softmax_dropped, a.context,
        a.attn_mask, a.x_mid, a.norm2_out, a.fc1_out, a.act_out, a.mlp_mask}) {
    if (t.bytes > best.bytes) best = t;
  }
  return best;
}

}  // namespace chameleon::train_sim

namespace chameleon::train_sim {

void ShapedModel::Park(int micro_batch) {
  InFlight f{std::move(resid_), std::move(acts_), tokens_, targets_, loss_, normed_, logits_, aux_};
  parked_.emplace_back(micro_batch, std::move(f));
  resid_.assign(static_cast<std::size_t>(spec_.layers) + 1, Tensor{});
  acts_.assign(static_cast<std::size_t>(spec_.layers), LayerActivations{});
  tokens_ = targets_ = loss_ = normed_ = logits_ = aux_ = Tensor{};
}

void ShapedModel::Resume(int micro_batch) {
  const auto it = std::find_if(parked_.begin(), parked_.end(),
                               [&](const auto& p) { return p.first == micro_batch; });
  if (it == parked_.end()) throw std::logic_error("train-sim bug: resumed an unparked micro-batch");
  InFlight& f = it->second;
  resid_ = std::move(f.resid);
  acts_ = std::move(f.acts);
  tokens_ = f.tokens;
  targets_ = f.targets;
  loss_ = f.loss;
  normed_ = f.normed;
  logits_ = f.logits;
  aux_ = f.aux;
  parked_.erase(it);
}

}  // namespace chameleon::train_sim
