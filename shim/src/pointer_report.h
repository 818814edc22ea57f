// Tells the daemon which allocations a pointer-table scan found pointed to
// (ipc::RecordType::kPointerTargets, layout 1.2), so that its later candidates exclude the same
// tensors even when the program allocates them afresh (docs/executor.md, "Pointer tables"). The
// shim's own protection (kNeverSwap + ExecutorPin of each target) does not depend on it.
// Thread-safe (the telemetry ring has its own lock); not for the op hot path (it allocates).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>

namespace chameleon::shim {

struct Runtime;

/// Pushes scan `scan`'s targets (bases of tracked allocations) as allocation ids; nothing while
/// no daemon is attached or when no target is a tracked allocation.
void ReportPointerTargets(Runtime& rt, std::uint64_t scan, std::span<const CUdeviceptr> targets);

}  // namespace chameleon::shim
