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

const PlanMemory::Plan* PlanMemory::Recall(const SequenceKey& sequence, std::uint64_t device_limit,
                                           std::uint64_t exclusions) {
  const auto it = std::find_if(plans_.begin(), plans_.end(), [&](const Plan& p) {
    return p.sequence == sequence && p.device_limit == device_limit && p.exclusions == exclusions;
  });
  if (it == plans_.end()) return nullptr;
  // Most recently used last: a recalled plan is the last to go.
  std::rotate(it, it + 1, plans_.end());
  ++recalls_;
  return &plans_.back();
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
