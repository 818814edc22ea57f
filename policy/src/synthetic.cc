#include "chameleon/policy/synthetic.h"

#include <algorithm>
#include <cmath>

namespace chameleon::policy {
namespace {

// splitmix64: portable and deterministic (std distributions are not across libraries).
std::uint64_t Next(std::uint64_t* state) {
  std::uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Uniform(std::uint64_t* state) { return (Next(state) >> 11) * 0x1.0p-53; }

class Builder {
 public:
  explicit Builder(const SyntheticSpec& spec) : spec_(spec), rng_(spec.seed) {}
  Profile Build();

 private:
  std::uint32_t AddOp(std::uint32_t token, Phase phase);
  std::uint32_t NewTensor(std::uint64_t bytes, std::int32_t alloc_op);
  void Use(std::uint32_t tensor, std::uint32_t op, bool write);
  void Step(std::uint32_t token, Phase phase, std::uint32_t j, std::vector<std::uint32_t>* saved);
  std::uint32_t WritesNow();
  void Forward(std::uint32_t layer, std::uint32_t ops);
  void Backward(std::uint32_t layer, std::uint32_t ops);
  void FillLiveBytes();

  const SyntheticSpec& spec_;
  std::uint64_t rng_;
  Profile p_;
  std::vector<std::vector<std::uint32_t>> saved_;  // per layer, in forward order
  std::vector<std::uint32_t> params_;              // two per layer
  std::vector<std::uint32_t> grads_;               // one per layer, in backward order
  std::int64_t current_ = -1;                      // the activation flowing through
  bool current_temp_ = false;
  double write_rate_ = 1;
  double write_acc_ = 0;
};

std::uint32_t Builder::AddOp(std::uint32_t token, Phase phase) {
  ProfileOp op;
  op.token = token;
  op.phase = spec_.label_phases ? phase : Phase::kUnknown;
  p_.ops.push_back(std::move(op));
  return static_cast<std::uint32_t>(p_.ops.size() - 1);
}

std::uint32_t Builder::NewTensor(std::uint64_t bytes, std::int32_t alloc_op) {
  ProfileTensor t;
  t.external_id = p_.tensors.size() + 1;
  t.bytes = bytes;
  t.alloc_op = alloc_op;
  p_.tensors.push_back(std::move(t));
  return static_cast<std::uint32_t>(p_.tensors.size() - 1);
}

void Builder::Use(std::uint32_t tensor, std::uint32_t op, bool write) {
  std::vector<std::uint32_t>& uses = p_.tensors[tensor].uses;
  if (!uses.empty() && uses.back() == op) return;
  uses.push_back(op);
  (write ? p_.ops[op].writes : p_.ops[op].reads).push_back(tensor);
}

// How many new tensors this op writes (a fractional rate spread evenly over the ops).
std::uint32_t Builder::WritesNow() {
  write_acc_ += write_rate_;
  const auto writes = static_cast<std::uint32_t>(write_acc_);
  write_acc_ -= writes;
  return writes;
}

// One compute op: reads the flowing activation, maybe writes its successor.
void Builder::Step(std::uint32_t token, Phase phase, std::uint32_t j,
                   std::vector<std::uint32_t>* saved) {
  const std::uint32_t op = AddOp(token, phase);
  if (current_ >= 0) Use(static_cast<std::uint32_t>(current_), op, false);
  const std::uint32_t writes = WritesNow();
  if (writes == 0) return;
  // Side outputs (all but the last write): saved for the backward or dropped right away.
  for (std::uint32_t k = 1; k < writes; ++k) {
    const std::uint32_t side =
        NewTensor(spec_.activation_bytes * (1 + (j + k) % 3), static_cast<std::int32_t>(op));
    Use(side, op, true);
    if (saved != nullptr && Uniform(&rng_) < spec_.saved_fraction) {
      saved->push_back(side);
    } else {
      p_.tensors[side].free_op = static_cast<std::int32_t>(op);
    }
  }
  const std::int64_t previous = current_;
  const bool previous_temp = current_temp_;
  current_ = NewTensor(spec_.activation_bytes * (1 + j % 3), static_cast<std::int32_t>(op));
  Use(static_cast<std::uint32_t>(current_), op, true);
  current_temp_ = saved == nullptr || Uniform(&rng_) >= spec_.saved_fraction;
  if (!current_temp_) saved->push_back(static_cast<std::uint32_t>(current_));
  if (previous >= 0 && previous_temp) p_.tensors[previous].free_op = static_cast<std::int32_t>(op);
}

void Builder::Forward(std::uint32_t layer, std::uint32_t ops) {
  for (std::uint32_t j = 0; j < ops; ++j) {
    Step(1 + j % 16, Phase::kForward, j, &saved_[layer]);
    const std::uint32_t op = static_cast<std::uint32_t>(p_.ops.size() - 1);
    if (j == 0 || j == ops / 2) Use(params_[2 * layer + (j == 0 ? 0 : 1)], op, false);
  }
}

void Builder::Backward(std::uint32_t layer, std::uint32_t ops) {
  const std::vector<std::uint32_t>& saved = saved_[layer];
  std::size_t next_saved = saved.size();  // re-read in reverse order
  for (std::uint32_t j = 0; j < ops; ++j) {
    Step(33 + j % 16, Phase::kBackward, j, nullptr);
    const auto op = static_cast<std::uint32_t>(p_.ops.size() - 1);
    if (j == 0 || j == ops / 2) Use(params_[2 * layer + (j == 0 ? 0 : 1)], op, false);
    // Saved activation k (of m) is due at op ≈ (m - 1 - k) · ops / m.
    while (next_saved > 0 &&
           (saved.size() - next_saved) * ops <= static_cast<std::size_t>(j) * saved.size()) {
      const std::uint32_t t = saved[--next_saved];
      Use(t, op, false);
      p_.tensors[t].free_op = static_cast<std::int32_t>(op);
    }
  }
  const auto last = static_cast<std::uint32_t>(p_.ops.size() - 1);
  const std::uint32_t grad = NewTensor(spec_.param_bytes, static_cast<std::int32_t>(last));
  Use(grad, last, true);
  grads_.push_back(grad);
}

void Builder::FillLiveBytes() {
  const std::size_t n = p_.ops.size();
  std::vector<std::int64_t> diff(n + 1, 0);
  for (const ProfileTensor& t : p_.tensors) {
    const std::size_t begin = t.alloc_op < 0 ? 0 : static_cast<std::size_t>(t.alloc_op);
    // Freed just after free_op: still counted there (docs/profile-format.md).
    const std::size_t end =
        t.free_op < 0 ? n : std::min(static_cast<std::size_t>(t.free_op) + 1, n);
    diff[begin] += static_cast<std::int64_t>(t.bytes);
    diff[end] -= static_cast<std::int64_t>(t.bytes);
  }
  std::int64_t live = 0;
  for (std::size_t i = 0; i < n; ++i) {
    live += diff[i];
    p_.ops[i].bytes_live_after = static_cast<std::uint64_t>(live);
  }
}

Profile Builder::Build() {
  const std::uint32_t layers = std::max<std::uint32_t>(spec_.layers, 1);
  const std::uint32_t forward = std::max<std::uint32_t>(2, spec_.ops / (3 * layers));
  const std::uint32_t backward = 2 * forward;
  const double fixed = 3.0 * layers;  // params and grads
  write_rate_ = std::max(0.0, (spec_.tensors - fixed) / (layers * (forward + backward) + 1.0));
  saved_.resize(layers);
  for (std::uint32_t i = 0; i < 2 * layers; ++i)
    params_.push_back(NewTensor(spec_.param_bytes, -1));
  for (std::uint32_t l = 0; l < layers; ++l) Forward(l, forward);
  const std::uint32_t loss = AddOp(50, Phase::kForward);
  if (current_ >= 0) Use(static_cast<std::uint32_t>(current_), loss, false);
  for (std::uint32_t l = layers; l-- > 0;) Backward(l, backward);
  if (current_ >= 0 && current_temp_) {
    p_.tensors[current_].free_op = static_cast<std::int32_t>(p_.tensors[current_].uses.back());
  }
  for (std::size_t k = 0; k < grads_.size(); ++k) {
    const std::size_t layer = layers - 1 - k;  // the backward ran from the last layer
    const std::uint32_t op = AddOp(60, Phase::kOptimizer);
    Use(grads_[k], op, false);
    p_.tensors[grads_[k]].free_op = static_cast<std::int32_t>(op);
    Use(params_[2 * layer], op, true);
    Use(params_[2 * layer + 1], op, true);
  }
  // Whatever freed a tensor early (a saved activation still flowing as the current one), it
  // lives until its last use.
  for (ProfileTensor& t : p_.tensors) {
    if (t.free_op >= 0 && !t.uses.empty()) t.free_op = static_cast<std::int32_t>(t.uses.back());
  }
  FillLiveBytes();
  p_.iteration_s = spec_.iteration_s;
  p_.layers_hint = layers;
  p_.source = "synthetic transformer";
  return std::move(p_);
}

}  // namespace

Profile MakeTransformerProfile(const SyntheticSpec& spec) { return Builder(spec).Build(); }

Profile InsertOps(const Profile& profile, double fraction, std::uint64_t seed) {
  const std::size_t n = profile.ops.size();
  const auto extra = static_cast<std::size_t>(std::llround(std::max(0.0, fraction) * n));
  std::uint64_t rng = seed;
  // before[i] = inserted ops placed just before original op i (i == n: at the end).
  std::vector<std::uint32_t> before(n + 1, 0);
  for (std::size_t k = 0; k < extra; ++k) ++before[Next(&rng) % (n + 1)];
  std::vector<std::uint32_t> moved(n);  // new index of original op i
  Profile out = profile;
  out.ops.clear();
  std::vector<std::uint32_t> inserted;
  for (std::size_t i = 0; i <= n; ++i) {
    for (std::uint32_t k = 0; k < before[i]; ++k) {
      ProfileOp op;
      op.token = n == 0 ? 0 : profile.ops[Next(&rng) % n].token;
      op.phase = i < n ? profile.ops[i].phase : (n ? profile.ops[n - 1].phase : Phase::kUnknown);
      inserted.push_back(static_cast<std::uint32_t>(out.ops.size()));
      out.ops.push_back(std::move(op));
    }
    if (i == n) break;
    moved[i] = static_cast<std::uint32_t>(out.ops.size());
    out.ops.push_back(profile.ops[i]);
  }
  for (ProfileTensor& t : out.tensors) {
    for (std::uint32_t& use : t.uses) use = moved[use];
    if (t.alloc_op >= 0) t.alloc_op = static_cast<std::int32_t>(moved[t.alloc_op]);
    if (t.free_op >= 0) t.free_op = static_cast<std::int32_t>(moved[t.free_op]);
  }
  for (std::size_t k = 0; k < inserted.size(); k += 2) {  // every other one gets a scratch tensor
    const std::uint32_t op = inserted[k];
    ProfileTensor t;
    t.external_id = 1'000'000'000ull + k;
    t.bytes = 4096;
    t.alloc_op = static_cast<std::int32_t>(op);
    t.free_op = static_cast<std::int32_t>(op);
    t.uses = {op};
    out.ops[op].writes.push_back(static_cast<std::uint32_t>(out.tensors.size()));
    out.tensors.push_back(std::move(t));
  }
  // Live bytes: the original figure of the nearest original op before (inserted ops move none).
  std::uint64_t live = 0;
  for (ProfileOp& op : out.ops) {
    if (op.bytes_live_after != 0) live = op.bytes_live_after;
    op.bytes_live_after = live;
  }
  return out;
}

}  // namespace chameleon::policy
