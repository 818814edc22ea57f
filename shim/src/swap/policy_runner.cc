#include "swap/policy_runner.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace chameleon::shim::swap {
namespace {

void SortUnique(std::vector<std::uint32_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// A summary figure from the daemon (untrusted): 0 unless a plausible duration.
std::uint64_t SecondsToNs(double s) {
  return s > 0 && s < 1e6 ? static_cast<std::uint64_t>(s * 1e9) : 0;
}

}  // namespace

PolicyRunner::PolicyRunner(SwapEngine* engine, SwapCounters* counters)
    : engine_(engine), counters_(counters) {}

std::unique_ptr<PolicyRunner::Compiled> PolicyRunner::Compile(const ipc::Policy& policy) {
  auto c = std::make_unique<Compiled>();
  c->generation = policy.summary.generation;
  c->predicted_stall_ns = SecondsToNs(policy.summary.predicted_stall_s);
  c->predicted_in_wait_ns = SecondsToNs(policy.summary.predicted_in_wait_s);
  c->entries = policy.entries;
  c->leases = policy.leases;
  std::uint32_t highest = 0;
  for (const ipc::SwapEntry& e : c->entries) {
    for (const std::uint32_t t : {e.in_token, e.use_token, e.out_token}) {
      // Tokens the counter does not count never occur: their entries are left out below.
      if (t < OccurrenceCounter::kMaxTokens) highest = std::max(highest, t + 1);
    }
  }
  c->tokens.resize(highest);
  for (std::uint32_t i = 0; i < c->entries.size(); ++i) {
    const ipc::SwapEntry& e = c->entries[i];
    if (std::max({e.in_token, e.use_token, e.out_token}) >= OccurrenceCounter::kMaxTokens) {
      continue;
    }
    c->at[Anchor(e.in_token, e.in_occurrence)].swap_in.push_back(i);
    c->at[Anchor(e.use_token, e.use_occurrence)].wait.push_back(i);
    c->at[Anchor(e.out_token, e.out_occurrence)].swap_out.push_back(i);
    c->tokens[e.in_token].before.push_back(e.in_occurrence);
    c->tokens[e.use_token].before.push_back(e.use_occurrence);
    c->tokens[e.out_token].after.push_back(e.out_occurrence);
  }
  c->after.resize(highest);
  for (std::uint32_t t = 0; t < highest; ++t) {
    TokenAnchors& a = c->tokens[t];
    SortUnique(&a.before);
    SortUnique(&a.after);
    if (a.after.empty()) continue;
    AfterBits& bits = c->after[t];
    bits.after_first = a.after.front();
    const std::uint32_t distance = a.after.back() - a.after.front();
    bits.after_span = distance == ~0u ? distance : distance + 1;  // occurrence 2^32 - 1: never
    const std::size_t words = (static_cast<std::size_t>(bits.after_span) + 63) / 64;
    if (c->after_bits.size() + words > kMaxAfterBitsWords) {
      bits.word = kNone;
      continue;
    }
    bits.word = static_cast<std::uint32_t>(c->after_bits.size());
    c->after_bits.resize(c->after_bits.size() + words, 0);
    for (const std::uint32_t occurrence : a.after) {
      const std::uint32_t k = occurrence - bits.after_first;
      c->after_bits[bits.word + k / 64] |= 1ull << (k % 64);
    }
  }
  c->cursor = std::make_unique<std::atomic<std::uint64_t>[]>(highest);
  for (std::uint32_t t = 0; t < highest; ++t) c->cursor[t].store(~0ull, std::memory_order_relaxed);
  return c;
}

void PolicyRunner::SetPolicy(const ipc::Policy& policy) {
  std::unique_ptr<Compiled> c = Compile(policy);
  std::lock_guard lock(pending_mu_);
  pending_ = std::move(c);
}

void PolicyRunner::BeginIteration() {
  std::unique_ptr<Compiled> next;
  {
    std::lock_guard lock(pending_mu_);
    next = std::move(pending_);
  }
  std::lock_guard lock(mu_);
  const Compiled* installed = installed_.load(std::memory_order_relaxed);
  const bool switched = next != nullptr;
  const std::size_t old_n = installed ? installed->entries.size() : 0;
  // A wrapping entry of the new generation that names the same out anchor, argument and size
  // as a bound one of the old generation is the same tensor, off the device over the same
  // boundary: it keeps the binding and comes back at the new entry's own trigger.
  std::vector<AllocId> carried;
  std::vector<bool> kept(bound_.size(), false);  // by old entry: its binding was carried
  if (switched) {
    carried.assign(next->entries.size(), 0);
    if (installed != nullptr) {
      CarryWrappedBindings(*installed, *next, &carried, &kept);
      RememberWrapped(*installed);
    }
  }
  for (std::size_t i = 0; i < old_n && i < bound_.size(); ++i) {
    if (bound_[i] == 0) continue;
    const bool wraps = (installed->entries[i].entry_flags & ipc::kEntryWraps) != 0;
    // A non-wrapping entry should be back by now (its anchors were missed if not); a wrapping
    // one is brought back next iteration, unless the generation changes and nobody will. Either
    // way a prefetch now is cheaper than a safety-net fault later (no-op when resident).
    if ((!wraps || switched) && !kept[i]) engine_->SwapIn(bound_[i]);
    if (!wraps) bound_[i] = 0;
  }
  if (switched) {
    next->first_epoch = occurrences_.epoch();
    installed = next.get();
    tables_.push_back(std::move(next));
    installed_.store(installed, std::memory_order_release);
    engine_->ApplyLeases(installed->leases, installed->generation);
  } else {
    engine_->SettleLeases();  // a revocation still in progress
  }
  iteration_.fetch_add(1, std::memory_order_relaxed);
  const std::size_t n = installed ? installed->entries.size() : 0;
  if (switched) {
    bound_ = std::move(carried);
  } else if (bound_.size() != n) {
    bound_.assign(n, 0);
  }
  dead_.assign(n, 0);
  counters_->policy_generation.store(generation(), std::memory_order_relaxed);
  counters_->predicted_stall_ns.store(installed ? installed->predicted_stall_ns : 0,
                                      std::memory_order_relaxed);
  counters_->predicted_in_wait_ns.store(installed ? installed->predicted_in_wait_ns : 0,
                                        std::memory_order_relaxed);
  engine_->FlushUnmaps();
  counters_->CloseIteration();
}

void PolicyRunner::CarryWrappedBindings(const Compiled& from, const Compiled& to,
                                        std::vector<AllocId>* carried, std::vector<bool>* kept) {
  const auto key = [](const ipc::SwapEntry& e) {
    return std::tuple(e.out_token, e.out_occurrence, e.out_arg, e.bytes);
  };
  // Bound wrapping entries of `from`, by key: their index.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint16_t, std::uint64_t>, std::size_t> off;
  for (std::size_t i = 0; i < from.entries.size() && i < bound_.size(); ++i) {
    if (bound_[i] != 0 && (from.entries[i].entry_flags & ipc::kEntryWraps) != 0) {
      off.emplace(key(from.entries[i]), i);
    }
  }
  std::uint64_t count = 0;
  for (std::size_t j = 0; j < to.entries.size(); ++j) {
    if ((to.entries[j].entry_flags & ipc::kEntryWraps) == 0) continue;
    const auto it = off.find(key(to.entries[j]));
    if (it == off.end()) continue;
    (*carried)[j] = bound_[it->second];
    (*kept)[it->second] = true;
    ++count;
    off.erase(it);  // one tensor, one entry
  }
  // The rest: a plan that comes back names its tensors by its own sequence's anchors. The
  // tensor it had bound when last in force, if a wrapping entry of `from` holds it out now and
  // the sizes agree, is the one (persistent tensors, such as optimizer state, keep their
  // allocation). A wrong guess only moves a tensor at the other entry's triggers: the safety net
  // keeps every tensor whole.
  if (off.empty() || wrapped_last_.empty()) {
    counters_->Add(counters_->carried_bindings, count);
    return;
  }
  std::unordered_map<AllocId, std::size_t> out_now;  // tensor -> entry of `from` holding it
  for (const auto& [k, i] : off) out_now.emplace(bound_[i], i);
  for (std::size_t j = 0; j < to.entries.size() && !out_now.empty(); ++j) {
    const ipc::SwapEntry& e = to.entries[j];
    if ((e.entry_flags & ipc::kEntryWraps) == 0 || (*carried)[j] != 0) continue;
    const auto last = wrapped_last_.find(EntryKey(e));
    if (last == wrapped_last_.end()) continue;
    const auto held = out_now.find(last->second);
    if (held == out_now.end() || from.entries[held->second].bytes != e.bytes) continue;
    (*carried)[j] = held->first;
    (*kept)[held->second] = true;
    ++count;
    out_now.erase(held);
  }
  counters_->Add(counters_->carried_bindings, count);
}

void PolicyRunner::RememberWrapped(const Compiled& c) {
  if (wrapped_last_.size() > kMaxWrappedKeys) wrapped_last_.clear();
  for (std::size_t i = 0; i < c.entries.size() && i < bound_.size(); ++i) {
    if (bound_[i] != 0 && (c.entries[i].entry_flags & ipc::kEntryWraps) != 0) {
      wrapped_last_[EntryKey(c.entries[i])] = bound_[i];
    }
  }
}

std::uint64_t PolicyRunner::EntryKey(const ipc::SwapEntry& e) {
  // FNV-1a over the fields, a word at a time: a collision only costs a wrong guess (above).
  std::uint64_t h = 14695981039346656037ull;
  for (const std::uint64_t v :
       {e.bytes, std::uint64_t{e.out_token} << 32 | e.out_occurrence,
        std::uint64_t{e.in_token} << 32 | e.in_occurrence,
        std::uint64_t{e.use_token} << 32 | e.use_occurrence, std::uint64_t{e.out_arg}}) {
    h = (h ^ v) * 1099511628211ull;
  }
  return h;
}

void PolicyRunner::Ignore(std::uint32_t entry) {
  if (!dead_[entry]) counters_->Add(counters_->policy_ignored);
  dead_[entry] = 1;
  bound_[entry] = 0;
}

AllocId PolicyRunner::BindAtOut(std::uint32_t entry, std::span<const OpTensor> tensors) {
  const ipc::SwapEntry& e = installed_.load(std::memory_order_relaxed)->entries[entry];
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

void PolicyRunner::FireBefore(const Compiled* c, std::uint32_t token, const OccurrenceTicket& t,
                              CUstream stream) {
  std::lock_guard lock(mu_);
  // A boundary may have switched the generation since the caller's check: the op is the new
  // table's, and its own check would start over.
  if (installed_.load(std::memory_order_relaxed) != c || t.epoch < c->first_epoch) return;
  const std::uint32_t next = NextBefore(*c, token, t.epoch);
  if (t.occurrence < next) return;  // another thread fired it meanwhile
  const std::vector<std::uint32_t>& before = c->tokens[token].before;
  auto it = std::lower_bound(before.begin(), before.end(), next);
  const auto end = std::upper_bound(it, before.end(), t.occurrence);
  for (; it != end; ++it) {
    const Actions& a = c->at.find(Anchor(token, *it))->second;
    // Unbound entries (out anchor not reached yet under this generation) simply do nothing.
    for (std::uint32_t e : a.swap_in) {
      if (AllocId id = dead_[e] ? 0 : bound_[e]; id && engine_->SwapIn(id) == CUDA_ERROR_NOT_FOUND)
        Ignore(e);
    }
    for (std::uint32_t e : a.wait) {
      if (AllocId id = dead_[e] ? 0 : bound_[e];
          id && engine_->WaitResident(id, stream) == CUDA_ERROR_NOT_FOUND)
        Ignore(e);
    }
  }
  const std::uint32_t after = end == before.end() ? kNone : *end;
  c->cursor[token].store((static_cast<std::uint64_t>(t.epoch) << 32) | after,
                         std::memory_order_release);
}

bool PolicyRunner::IsListedAfterAnchor(const Compiled& c, std::uint32_t token,
                                       std::uint32_t occurrence) {
  const std::vector<std::uint32_t>& after = c.tokens[token].after;
  return std::binary_search(after.begin(), after.end(), occurrence);
}

void PolicyRunner::AfterOp(std::uint32_t token, const OccurrenceTicket& t, CUstream stream,
                           std::span<const OpTensor> tensors) {
  if (!HasAfterTrigger(token, t)) return;
  std::lock_guard lock(mu_);
  const Compiled* c = installed_.load(std::memory_order_relaxed);
  if (!IsAfterAnchor(*c, token, t)) return;  // a switch since the check
  for (std::uint32_t e : c->at.find(Anchor(token, t.occurrence))->second.swap_out) {
    if (dead_[e]) continue;
    const AllocId id = BindAtOut(e, tensors);
    if (id == 0) continue;
    const CUresult r = engine_->SwapOut(id, stream, PlacementOf(c->entries[e]));
    // Freed meanwhile, or pinned since the plan was made (a pointer-table target, an exported
    // range): the plan counted these bytes as off the device, so the entry is counted, not
    // silently kept — the daemon plans without such tensors once it knows (docs/executor.md).
    if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_NOT_PERMITTED) Ignore(e);
  }
}

}  // namespace chameleon::shim::swap
