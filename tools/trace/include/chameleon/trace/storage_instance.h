// StorageInstance, one lifetime of one CUDA storage id: an element of Workload::storages
// (workload.h), and what the workload builder's StorageTracker (src/storage_tracker.h) produces.
// Apart from workload.h so that the tracker need not include the builder's own header. A value
// type.
#pragma once

#include <cstdint>

namespace chameleon::trace {

/// One lifetime of one CUDA storage id. A storage id that is re-created by an allocating op
/// after its previous lifetime ended starts a new instance.
struct StorageInstance {
  std::uint64_t storage_id = 0;
  std::uint64_t bytes = 0;      ///< largest extent of the tensors that view it
  std::int64_t create_op = -1;  ///< allocated just before this op; -1: exists before the trace
  std::int64_t first_use = -1;  ///< first op reading or writing it (-1: none)
  std::int64_t last_use = -1;   ///< last op reading or writing it (-1: none)
  bool persistent = false;      ///< lives across iterations (see docs/replay.md)
};

}  // namespace chameleon::trace
