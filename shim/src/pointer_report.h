// TelemetryUplink: the op path's side of the executor's ExecutorUplink (executor.h). It tells the
// daemon which allocations a pointer-table scan found pointed to (ipc::RecordType::kPointerTargets,
// layout 1.2), so that its later candidates exclude the same tensors even when the program
// allocates them afresh (docs/executor.md, "Pointer tables"), and answers how many detailed
// iterations the telemetry has finished. The shim's own protection (kNeverSwap + ExecutorPin of
// each target) does not depend on it.
//
// Thread-safe (the telemetry ring has its own lock); not for the op hot path (it allocates).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>

#include "executor.h"

namespace chameleon::shim {

struct Runtime;

class TelemetryUplink final : public ExecutorUplink {
 public:
  explicit TelemetryUplink(Runtime* rt) : rt_(rt) {}
  std::uint64_t DetailedIterationsDone() const override;
  /// Pushes scan `scan`'s targets (bases of tracked allocations) as allocation ids; nothing while
  /// no daemon is attached or when no target is a tracked allocation.
  void PointerTargetsFound(std::uint64_t scan, std::span<const CUdeviceptr> targets) override;

 private:
  Runtime* rt_;
};

}  // namespace chameleon::shim
