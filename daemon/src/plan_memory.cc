#include "chameleon/daemon/plan_memory.h"

#include <algorithm>
#include <utility>

namespace chameleon::daemon {

void PlanMemory::Remember(Plan plan) {
  if (capacity_ == 0) return;
  std::erase_if(plans_, [&](const Plan& p) { return p.sequence == plan.sequence; });
  plans_.push_back(std::move(plan));
  Trim();
}

std::vector<PlanMemory::Plan>::iterator PlanMemory::Find(const SequenceKey& sequence,
                                                         std::uint64_t device_limit,
                                                         std::optional<std::uint64_t> exclusions,
                                                         bool in_progress) {
  return std::find_if(plans_.begin(), plans_.end(), [&](const Plan& p) {
    return Matches(p, sequence, device_limit, exclusions, in_progress);
  });
}

bool PlanMemory::Matches(const Plan& plan, const SequenceKey& sequence, std::uint64_t device_limit,
                         std::optional<std::uint64_t> exclusions, bool in_progress) {
  return plan.sequence == sequence && plan.device_limit == device_limit &&
         (!exclusions || plan.exclusions == *exclusions) &&
         plan.progress.has_value() == in_progress;
}

const PlanMemory::Plan* PlanMemory::Recall(const SequenceKey& sequence, std::uint64_t device_limit,
                                           std::uint64_t exclusions) {
  const auto it = Find(sequence, device_limit, exclusions, false);
  if (it == plans_.end()) return nullptr;
  // Most recently used last: a recalled plan is the last to go.
  std::rotate(it, it + 1, plans_.end());
  ++recalls_;
  return &plans_.back();
}

const PlanMemory::Plan* PlanMemory::Peek(const SequenceKey& sequence, std::uint64_t device_limit,
                                         std::uint64_t exclusions) const {
  const auto it = std::find_if(plans_.begin(), plans_.end(), [&](const Plan& p) {
    return Matches(p, sequence, device_limit, exclusions, false);
  });
  return it == plans_.end() ? nullptr : &*it;
}

std::optional<PlanMemory::Plan> PlanMemory::Resume(const SequenceKey& sequence,
                                                   std::uint64_t device_limit) {
  const auto it = Find(sequence, device_limit, std::nullopt, true);
  if (it == plans_.end()) return std::nullopt;
  std::optional<Plan> out(std::move(*it));
  plans_.erase(it);
  ++resumes_;
  return out;
}

void PlanMemory::CreditProgress(std::uint64_t generation, std::uint64_t interval, double seconds) {
  for (Plan& p : plans_) {
    if (p.progress && p.progress->Credit(generation, interval, seconds)) return;
  }
}

std::size_t PlanMemory::in_progress() const {
  return static_cast<std::size_t>(std::count_if(
      plans_.begin(), plans_.end(), [](const Plan& p) { return p.progress.has_value(); }));
}

void PlanMemory::SetCapacity(std::size_t capacity) {
  capacity_ = capacity;
  Trim();
}

void PlanMemory::Trim() {
  if (plans_.size() > capacity_) {
    plans_.erase(plans_.begin(), plans_.begin() + std::ptrdiff_t(plans_.size() - capacity_));
  }
}

}  // namespace chameleon::daemon
