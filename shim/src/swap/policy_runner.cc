#include "swap/policy_runner.h"

#include <utility>

namespace chameleon::shim::swap {

PolicyRunner::PolicyRunner(SwapEngine* engine, SwapCounters* counters)
    : engine_(engine), counters_(counters) {
  occurrences_.reserve(1024);
}

void PolicyRunner::SetPolicy(const ipc::Policy& policy) {
  auto c = std::make_shared<Compiled>();
  c->generation = policy.summary.generation;
  const double stall_s = policy.summary.predicted_stall_s;
  c->predicted_stall_ns =
      stall_s > 0 && stall_s < 1e6 ? static_cast<std::uint64_t>(stall_s * 1e9) : 0;
  c->entries = policy.entries;
  for (std::uint32_t i = 0; i < c->entries.size(); ++i) {
    const ipc::SwapEntry& e = c->entries[i];
    if (e.tier != static_cast<std::uint16_t>(ipc::Tier::kHost)) continue;  // other tiers: later
    c->at[Anchor(e.in_token, e.in_occurrence)].swap_in.push_back(i);
    c->at[Anchor(e.use_token, e.use_occurrence)].wait.push_back(i);
    c->at[Anchor(e.out_token, e.out_occurrence)].swap_out.push_back(i);
  }
  std::lock_guard lock(pending_mu_);
  pending_ = std::move(c);
}

void PolicyRunner::BeginIteration() {
  std::shared_ptr<const Compiled> next;
  {
    std::lock_guard lock(pending_mu_);
    next = std::move(pending_);
  }
  const bool switched = next != nullptr;
  const std::size_t old_n = installed_ ? installed_->entries.size() : 0;
  for (std::size_t i = 0; i < old_n && i < bound_.size(); ++i) {
    if (bound_[i] == 0) continue;
    const bool wraps = (installed_->entries[i].entry_flags & ipc::kEntryWraps) != 0;
    // A non-wrapping entry should be back by now (its anchors were missed if not); a wrapping
    // one is brought back next iteration, unless the generation changes and nobody will. Either
    // way a prefetch now is cheaper than a safety-net fault later (no-op when resident).
    if (!wraps || switched) engine_->SwapIn(bound_[i]);
    if (!wraps) bound_[i] = 0;
  }
  if (switched) installed_ = std::move(next);
  ++iteration_;
  occurrences_.clear();
  const std::size_t n = installed_ ? installed_->entries.size() : 0;
  if (switched || bound_.size() != n) bound_.assign(n, 0);
  dead_.assign(n, 0);
  counters_->policy_generation.store(generation(), std::memory_order_relaxed);
  counters_->predicted_stall_ns.store(installed_ ? installed_->predicted_stall_ns : 0,
                                      std::memory_order_relaxed);
  engine_->FlushUnmaps();
  counters_->CloseIteration();
}

void PolicyRunner::Ignore(std::uint32_t entry) {
  if (!dead_[entry]) counters_->Add(counters_->policy_ignored);
  dead_[entry] = 1;
  bound_[entry] = 0;
}

AllocId PolicyRunner::BindAtOut(std::uint32_t entry, std::span<const OpTensor> tensors) {
  const ipc::SwapEntry& e = installed_->entries[entry];
  AllocId id = 0;
  if (e.out_arg < tensors.size() && tensors[e.out_arg].bytes == e.bytes) {
    id = tensors[e.out_arg].id;
  } else {
    // The op's tensor list differs from the profile's (an argument the profile did not see):
    // the first tensor of the planned size is the best remaining guess.
    for (const OpTensor& t : tensors) {
      if (t.bytes == e.bytes && t.id != 0) {
        id = t.id;
        break;
      }
    }
  }
  if (id == 0) Ignore(entry);
  bound_[entry] = id;
  return id;
}

std::uint32_t PolicyRunner::BeforeOp(std::uint32_t token, CUstream stream) {
  const std::uint32_t occurrence = occurrences_[token]++;
  if (!installed_) return occurrence;
  auto it = installed_->at.find(Anchor(token, occurrence));
  if (it == installed_->at.end()) return occurrence;
  // Unbound entries (out anchor not reached yet under this generation) simply do nothing.
  for (std::uint32_t e : it->second.swap_in) {
    if (AllocId id = dead_[e] ? 0 : bound_[e]; id && engine_->SwapIn(id) == CUDA_ERROR_NOT_FOUND)
      Ignore(e);
  }
  for (std::uint32_t e : it->second.wait) {
    if (AllocId id = dead_[e] ? 0 : bound_[e];
        id && engine_->WaitResident(id, stream) == CUDA_ERROR_NOT_FOUND)
      Ignore(e);
  }
  return occurrence;
}

void PolicyRunner::AfterOp(std::uint32_t token, std::uint32_t occurrence, CUstream stream,
                           std::span<const OpTensor> tensors) {
  if (!installed_) return;
  auto it = installed_->at.find(Anchor(token, occurrence));
  if (it == installed_->at.end()) return;
  for (std::uint32_t e : it->second.swap_out) {
    if (dead_[e]) continue;
    if (AllocId id = BindAtOut(e, tensors);
        id && engine_->SwapOut(id, stream) == CUDA_ERROR_NOT_FOUND)
      Ignore(e);
  }
}

}  // namespace chameleon::shim::swap
