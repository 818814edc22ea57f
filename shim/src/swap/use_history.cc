#include "swap/use_history.h"

#include <sys/mman.h>

#include <algorithm>

namespace chameleon::shim::swap {
namespace {

// Key spaces: bits 62-63 say which (0: an id, 1: ordinal of age 0, 2: ordinal of age 1).
constexpr std::uint64_t kAge0 = 1ull << 62;
constexpr std::uint64_t kAge1 = 2ull << 62;

}  // namespace

UseHistory::UseHistory() {
  for (Entry*& log : logs_) {
    void* p = mmap(nullptr, kLogBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    // Without a log every iteration counts as not known: eviction by the closest size.
    log = p == MAP_FAILED ? nullptr : static_cast<Entry*>(p);
  }
}

UseHistory::~UseHistory() {
  for (Entry* log : logs_) {
    if (log != nullptr) munmap(log, kLogBytes);
  }
}

std::uint64_t UseHistory::Key(AllocId id, AllocId first, AllocId before) {
  if (id >= first) return kAge0 | (id - first);
  if (before != 0 && id >= before) return kAge1 | (id - before);
  return id;
}

void UseHistory::Close(std::uint32_t ops, AllocId next_id) {
  const std::uint32_t n = std::min(used_.load(std::memory_order_relaxed), kCapacity);
  const bool whole = first_ != 0 && !overflow_.load(std::memory_order_relaxed);
  // The log just written becomes the previous one; its lists are built when first asked for.
  previous_n_ = whole ? n : 0;
  previous_first_ = first_;
  previous_before_ = before_;
  previous_built_ = false;
  known_ = whole;
  previous_ops_ = ops;
  before_ = first_;
  first_ = next_id;
  // The other log is written from now on; its old entries carry an older tag.
  tag_.store(tag_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  used_.store(0, std::memory_order_relaxed);
  overflow_.store(false, std::memory_order_relaxed);
}

void UseHistory::Skip(std::uint32_t ops, AllocId next_id) {
  previous_ops_ = ops;
  before_ = first_;
  first_ = next_id;
  // Nothing was written to the current log (same tag): it starts over when recording resumes.
  used_.store(0, std::memory_order_relaxed);
  overflow_.store(false, std::memory_order_relaxed);
}

void UseHistory::BuildPrevious() {
  previous_.clear();
  previous_built_ = true;
  const std::uint32_t tag = tag_.load(std::memory_order_relaxed) - 1;
  Entry* const log = logs_[tag & 1];
  const std::uint32_t n = log != nullptr ? previous_n_ : 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    // Not written in that iteration (a racing Record that had not stored yet, or one that
    // straddled the Close into the other log).
    if (std::atomic_ref(log[i].tag).load(std::memory_order_relaxed) != tag) continue;
    const AllocId id = std::atomic_ref(log[i].id).load(std::memory_order_relaxed);
    if (id == 0) continue;
    std::vector<std::uint32_t>& uses = previous_[Key(id, previous_first_, previous_before_)];
    const std::uint32_t position = std::atomic_ref(log[i].position).load(std::memory_order_relaxed);
    if (uses.empty() || uses.back() != position) uses.push_back(position);
  }
  // Several threads may interleave their entries: keep each list ascending.
  for (auto& [key, uses] : previous_) {
    if (!std::is_sorted(uses.begin(), uses.end())) std::sort(uses.begin(), uses.end());
  }
}

std::uint64_t UseHistory::NextUse(AllocId id, std::uint32_t now) {
  if (!previous_built_) BuildPrevious();
  // The same allocation one iteration later has aged by one: look it up under the key its
  // counterpart had in the previous iteration.
  const std::uint64_t key = Key(id, first_, before_);
  const auto it = previous_.find(key);
  if (it == previous_.end() || it->second.empty()) return kUnknown;
  const std::vector<std::uint32_t>& uses = it->second;
  const auto next = std::upper_bound(uses.begin(), uses.end(), now);
  // No use left in this iteration: its first use in the next one (an id key, i.e. a long-lived
  // allocation), or never (an allocation of this iteration is freed before the next).
  if (next != uses.end()) return *next;
  if ((key >> 62) == 0) return previous_ops_ + static_cast<std::uint64_t>(uses.front());
  return kUnknown;
}

}  // namespace chameleon::shim::swap
