#include "storage_tracker.h"

#include <algorithm>

namespace chameleon::trace::detail {

std::uint32_t StorageTracker::Create(const TensorRef& t, std::int64_t next_op) {
  StorageInstance inst;
  inst.storage_id = t.storage_id;
  inst.create_op = next_op;
  instances_.push_back(inst);
  const auto idx = static_cast<std::uint32_t>(instances_.size() - 1);
  current_[t.storage_id] = idx;
  Grow(idx, t);
  return idx;
}

std::uint32_t StorageTracker::Resolve(const TensorRef& t) {
  auto it = current_.find(t.storage_id);
  std::uint32_t idx;
  if (it != current_.end()) {
    idx = it->second;
  } else {
    StorageInstance inst;
    inst.storage_id = t.storage_id;
    instances_.push_back(inst);
    idx = static_cast<std::uint32_t>(instances_.size() - 1);
    current_.emplace(t.storage_id, idx);
  }
  Grow(idx, t);
  return idx;
}

void StorageTracker::Grow(std::uint32_t inst, const TensorRef& t) {
  // A broadcast view reaches at least one element at its offset; its numel says nothing more.
  const bool broadcast = broadcast_.count(t.tensor_id) != 0;
  const std::uint64_t extent = broadcast ? (t.offset + 1) * t.elem_size : t.Extent();
  instances_[inst].bytes = std::max(instances_[inst].bytes, extent);
}

}  // namespace chameleon::trace::detail
