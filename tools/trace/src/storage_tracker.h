// Internal: splits CUDA storage ids into lifetimes (StorageInstance) while the workload
// builder walks the trace in op-entry order. Not thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "chameleon/trace/storage_instance.h"
#include "chameleon/trace/trace.h"

namespace chameleon::trace::detail {

class StorageTracker {
 public:
  /// Tensor ids whose extent must not size their storage (outputs of broadcasting views:
  /// an expanded tensor's numel counts stride-0 elements that are not in memory).
  explicit StorageTracker(std::unordered_set<std::uint64_t> broadcast_tensors)
      : broadcast_(std::move(broadcast_tensors)) {}

  /// `storage_id` is (re-)created just before op `next_op`: a new lifetime starts and the
  /// previous one, if any, is over.
  /// Returns the new instance's index.
  std::uint32_t Create(const TensorRef& t, std::int64_t next_op);

  /// The current instance of t's storage (a pre-existing one is made on first sight), grown to
  /// cover t's extent.
  std::uint32_t Resolve(const TensorRef& t);

  /// Moves the instances out; indices are those returned by Resolve.
  std::vector<StorageInstance> Take() { return std::move(instances_); }

 private:
  void Grow(std::uint32_t inst, const TensorRef& t);

  std::unordered_set<std::uint64_t> broadcast_;
  std::unordered_map<std::uint64_t, std::uint32_t> current_;  // storage id -> instance
  std::vector<StorageInstance> instances_;
};

}  // namespace chameleon::trace::detail
