#include "chameleon/daemon/profile_builder.h"

#include "chameleon/ipc/event_records.h"

namespace chameleon::daemon {

void ProfileBuilder::Begin(const std::unordered_map<std::uint64_t, LiveAllocation>* live) {
  profile_ = policy::Profile{};
  index_.clear();
  live_ = live;
}

std::uint32_t ProfileBuilder::TensorIndex(std::uint64_t id) {
  auto [it, inserted] = index_.emplace(id, static_cast<std::uint32_t>(profile_.tensors.size()));
  if (inserted) {
    // First seen in a use: allocated before the iteration started (alloc_op stays -1).
    policy::ProfileTensor tensor;
    tensor.external_id = id;
    if (live_ != nullptr) {
      auto live = live_->find(id);
      if (live != live_->end()) {
        tensor.bytes = live->second.bytes;
        tensor.swappable = live->second.swappable;
        tensor.pinned = live->second.pinned;
        tensor.device = live->second.device;
      }
    }
    profile_.tensors.push_back(std::move(tensor));
  }
  return it->second;
}

void ProfileBuilder::Use(std::uint32_t tensor, std::uint32_t op) {
  auto& uses = profile_.tensors[tensor].uses;
  if (uses.empty() || uses.back() != op) uses.push_back(op);
}

void ProfileBuilder::AddOp(std::uint32_t token, std::span<const std::uint64_t> reads,
                           std::uint64_t written) {
  const auto op = static_cast<std::uint32_t>(profile_.ops.size());
  policy::ProfileOp entry;
  entry.token = token;
  // Device bytes in use carry over until a MemInfo record says otherwise.
  if (!profile_.ops.empty()) entry.bytes_live_after = profile_.ops.back().bytes_live_after;
  for (std::uint64_t id : reads) {
    if (id == ipc::kNoAllocation) continue;
    const std::uint32_t tensor = TensorIndex(id);
    bool duplicate = false;
    for (std::uint32_t r : entry.reads) duplicate |= r == tensor;
    if (duplicate) continue;
    entry.reads.push_back(tensor);
    Use(tensor, op);
  }
  if (written != ipc::kNoAllocation) {
    const std::uint32_t tensor = TensorIndex(written);
    entry.writes.push_back(tensor);
    Use(tensor, op);
  }
  profile_.ops.push_back(std::move(entry));
}

void ProfileBuilder::AddAlloc(std::uint64_t id, std::uint64_t bytes, bool swappable,
                              std::uint16_t device) {
  // An id reused inside the iteration cannot happen (ids are monotonic); a hostile client's
  // duplicate simply updates the same tensor.
  const std::uint32_t tensor = TensorIndex(id);
  auto& t = profile_.tensors[tensor];
  t.bytes = bytes;
  t.swappable = swappable;
  t.device = device;
  t.alloc_op = static_cast<std::int32_t>(profile_.ops.size());
}

void ProfileBuilder::AddFree(std::uint64_t id) {
  auto it = index_.find(id);
  const std::uint32_t tensor = it != index_.end() ? it->second : TensorIndex(id);
  profile_.tensors[tensor].free_op = static_cast<std::int32_t>(profile_.ops.size()) - 1;
}

void ProfileBuilder::SetOpTime(std::uint32_t op, double seconds) {
  if (op < profile_.ops.size() && seconds >= 0) profile_.ops[op].device_s = seconds;
}

void ProfileBuilder::AddMemInfo(std::uint64_t bytes_live) {
  if (!profile_.ops.empty()) profile_.ops.back().bytes_live_after = bytes_live;
}

policy::Profile ProfileBuilder::Finish(const std::unordered_map<std::uint32_t, std::string>& names,
                                       double iteration_s, std::string source) {
  const auto op_count = static_cast<std::int32_t>(profile_.ops.size());
  for (auto& op : profile_.ops) {
    auto it = names.find(op.token);
    if (it != names.end()) op.name = it->second;
  }
  for (auto& tensor : profile_.tensors) {
    // Allocated after the last op, or freed before the first: clamp into the iteration.
    if (tensor.alloc_op >= op_count) tensor.alloc_op = op_count > 0 ? op_count - 1 : -1;
    if (tensor.free_op < -1) tensor.free_op = -1;
    if (tensor.free_op >= 0 && tensor.free_op < tensor.alloc_op) tensor.free_op = tensor.alloc_op;
  }
  profile_.iteration_s = iteration_s;
  profile_.source = std::move(source);
  policy::Profile out = std::move(profile_);
  profile_ = policy::Profile{};
  index_.clear();
  return out;
}

}  // namespace chameleon::daemon
