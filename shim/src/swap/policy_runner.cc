#include "swap/policy_runner.h"

#include <utility>

namespace chameleon::shim::swap {

PolicyRunner::PolicyRunner(SwapEngine* engine, SwapCounters* counters, Resolver resolver)
    : engine_(engine), counters_(counters), resolver_(std::move(resolver)) {
  occurrences_.reserve(1024);
}

void PolicyRunner::SetPolicy(const ipc::Policy& policy) {
  auto c = std::make_shared<Compiled>();
  c->generation = policy.summary.generation;
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
  {
    std::lock_guard lock(pending_mu_);
    if (pending_) installed_ = std::move(pending_);
  }
  ++iteration_;
  occurrences_.clear();
  const std::size_t n = installed_ ? installed_->entries.size() : 0;
  bound_.assign(n, 0);
  dead_.assign(n, 0);
  counters_->policy_generation.store(generation(), std::memory_order_relaxed);
  engine_->FlushUnmaps();
}

void PolicyRunner::Ignore(std::uint32_t entry) {
  if (!dead_[entry]) counters_->Add(counters_->policy_ignored);
  dead_[entry] = 1;
}

AllocId PolicyRunner::Bind(std::uint32_t entry) {
  if (dead_[entry]) return 0;
  if (bound_[entry] == 0) {
    bound_[entry] = resolver_ ? resolver_(installed_->entries[entry]) : 0;
    if (bound_[entry] == 0) Ignore(entry);
  }
  return bound_[entry];
}

std::uint32_t PolicyRunner::BeforeOp(std::uint32_t token, CUstream stream) {
  const std::uint32_t occurrence = occurrences_[token]++;
  if (!installed_) return occurrence;
  auto it = installed_->at.find(Anchor(token, occurrence));
  if (it == installed_->at.end()) return occurrence;
  for (std::uint32_t e : it->second.swap_in) {
    if (AllocId id = Bind(e); id && engine_->SwapIn(id) == CUDA_ERROR_NOT_FOUND) Ignore(e);
  }
  for (std::uint32_t e : it->second.wait) {
    if (AllocId id = Bind(e); id && engine_->WaitResident(id, stream) == CUDA_ERROR_NOT_FOUND)
      Ignore(e);
  }
  return occurrence;
}

void PolicyRunner::AfterOp(std::uint32_t token, std::uint32_t occurrence, CUstream stream) {
  if (!installed_) return;
  auto it = installed_->at.find(Anchor(token, occurrence));
  if (it == installed_->at.end()) return;
  for (std::uint32_t e : it->second.swap_out) {
    if (AllocId id = Bind(e); id && engine_->SwapOut(id, stream) == CUDA_ERROR_NOT_FOUND) Ignore(e);
  }
}

}  // namespace chameleon::shim::swap
