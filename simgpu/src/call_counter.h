// Per-entry-point call counters and the host virtual clock tick shared by every exported function.
#pragma once

#include <atomic>
#include <cstdint>

namespace chameleon::simgpu::detail {

/// Returns the counter for the exported entry point `name` (a string literal), creating it once.
/// Thread-safe; the pointer stays valid for the life of the process.
std::atomic<std::uint64_t>* RegisterCounter(const char* name);
/// Counter value for `name`, 0 if never called.
std::uint64_t CallCount(const char* name);
/// Advances the host virtual clock by the configured per-call cost.
void HostTick();
/// Held across fork() (see driver.cc).
void LockCountersForFork();
void UnlockCountersAfterFork();

}  // namespace chameleon::simgpu::detail

/// Counts the call without charging the host clock: for polls (cuStreamQuery, cuEventQuery),
/// which charge it themselves only when they report completion (docs/simgpu.md).
#define SIMGPU_ENTRY_NO_TICK()                                     \
  static std::atomic<std::uint64_t>* const simgpu_entry_counter_ = \
      ::chameleon::simgpu::detail::RegisterCounter(__func__);      \
  simgpu_entry_counter_->fetch_add(1, std::memory_order_relaxed)

/// First statement of every exported entry point: count the call under its exact exported name
/// (static local: one registration, then one relaxed atomic add) and charge the host clock.
#define SIMGPU_ENTRY()                                             \
  static std::atomic<std::uint64_t>* const simgpu_entry_counter_ = \
      ::chameleon::simgpu::detail::RegisterCounter(__func__);      \
  simgpu_entry_counter_->fetch_add(1, std::memory_order_relaxed);  \
  ::chameleon::simgpu::detail::HostTick()
