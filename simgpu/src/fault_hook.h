// The test-only copy fault hook SIMGPU_FAULT_DROP_COPY=<n>:<min-size> (docs/simgpu.md, "Fault
// hook"): the n-th host-to-device copy out of pinned host memory of at least min-size bytes
// leaves the 2 MiB in its middle uncopied, so that the destination keeps what it held before. A
// swap-in is such a copy, so a test can lose one chunk of one swapped tensor deterministically,
// whatever the timing: the choice is made when the copy is submitted, by count.
#pragma once

#include <cstddef>
#include <string>

#include "sparse_copy.h"

namespace chameleon::simgpu {

/// The 2 MiB a dropped copy leaves out (centred on the copy's middle).
inline constexpr std::size_t kDroppedBytes = 2u << 20;

/// Reads SIMGPU_FAULT_DROP_COPY once, at cuInit. Returns "" (also when unset) or a message that
/// names the variable; the hook is then off.
std::string LoadFaultHook();

/// Called once per submitted host-to-device copy of `n` bytes whose source is pinned host
/// memory: the bytes to skip (empty for every copy but the chosen one). Thread-safe (one atomic
/// counter; copies submitted concurrently from several threads are counted in an order the
/// threads decide, so deterministic tests submit them from one).
Skip FaultHookSkip(std::size_t n);

}  // namespace chameleon::simgpu
