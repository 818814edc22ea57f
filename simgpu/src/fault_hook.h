// The test-only copy fault hooks (docs/simgpu.md, "Fault hook"). Counting host-to-device copies
// out of pinned host memory of at least min-size bytes (a swap-in is one), the n-th is chosen
// when it is submitted — by count, so the same copy in every run whatever the timing — and the
// 2 MiB in its middle are
//   SIMGPU_FAULT_DROP_COPY=<n>:<min-size>   never copied: the destination keeps what it held;
//   SIMGPU_FAULT_DELAY_COPY=<n>:<min-size>  copied late: the copy completes (its stream moves on
//       and every event after it fires) with the old bytes still there, and the right ones land
//       only when a later copy reads that device range — after every kernel that consumed it.
// Either one lets a test lose or stale one chunk of one swapped tensor deterministically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sparse_copy.h"

namespace chameleon::simgpu {

/// The 2 MiB a chosen copy leaves out (centred on the copy's middle).
inline constexpr std::size_t kDroppedBytes = 2u << 20;

/// Reads SIMGPU_FAULT_DROP_COPY and SIMGPU_FAULT_DELAY_COPY once, at cuInit. Returns "" (also
/// when both are unset) or a message that names the variable; the hooks are then off.
std::string LoadFaultHook();

/// What the hook does to one submitted copy.
struct FaultChoice {
  Skip skip;           ///< bytes the copy leaves untouched when it runs (empty: a normal copy)
  bool delay = false;  ///< the skipped bytes land later (LandDelayedBytes), not never
};

/// Called once per submitted host-to-device copy of `n` bytes whose source is pinned host
/// memory. Thread-safe (one atomic counter; copies submitted concurrently from several threads
/// are counted in an order the threads decide, so deterministic tests submit them from one).
FaultChoice FaultHookChoose(std::size_t n);

/// Runs on the chosen delayed copy's stream worker, right after the copy: remembers the source
/// bytes [src, src + n) that were meant for [dst, dst + n).
void HoldDelayedBytes(std::uintptr_t dst, std::uintptr_t src, std::size_t n);

/// Runs on a stream worker before a copy reads [src, src + n): the held bytes that fall inside
/// that range land there first (the range is mapped, since the copy reads it), and the hook
/// forgets them. One relaxed load when nothing is held.
void LandDelayedBytes(std::uintptr_t src, std::size_t n);

}  // namespace chameleon::simgpu
