// Internal: puts a plan's swap-ins in the order the executor can serve them. The shim issues
// every swap-in on one in-stream, in trigger order, and a stream runs its copies one after the
// other: a swap-in issued before one whose use comes earlier delays that use by its whole
// transfer. The simulator places each swap-in on its own (per-layer link budgets), so a plan
// can issue them in any order; on an LLM step it typically issues the optimizer state of the
// last parameters first (their memory frees first in the backward), and the first Adam update
// then waits for every swap-in of the step (docs/policy.md "Swap-in order").
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/policy/plan.h"

namespace chameleon::policy::detail {

/// Reassigns `swaps`' in_start_op so that, folded onto one iteration (ops >= `ops` are the next
/// iteration's), swap-ins are issued in the order of their uses: each no earlier than the
/// previous one in use order, and as early as memory allows below the planning limit `limit`
/// (per-op memory without swaps = `memory_before`). A swap-in only moves earlier where every
/// op it then covers stays within the limit; moving one later never breaks the limit. Swaps
/// whose in and use lie in different iterations keep their ops. Returns how many moved.
/// O(swaps · log ops).
std::size_t OrderSwapInsByUse(const std::vector<std::uint64_t>& memory_before, std::int64_t limit,
                              std::vector<PlannedSwap>* swaps);

/// Drops the swaps a plan does not need once every swap's bytes may stay off until its use —
/// the relief OrderSwapInsByUse starts from before it issues swap-ins as early as memory
/// allows. The search places each swap-in right after the last op still over the limit at
/// that moment, so a swap placed late relieves only what the earlier ones left (on an LLM
/// step, the tail of the optimizer phase) while it moves its whole tensor across the link in
/// both directions. Tried shortest placed relief first, larger first among equals; a swap goes
/// when every op still fits (`limit`, per-op memory without swaps = `memory_before`) with the
/// others off from their free op to their use. Returns how many were dropped. Call before
/// OrderSwapInsByUse. O(swaps · log ops).
std::size_t DropSwapsRedundantUntilUse(const std::vector<std::uint64_t>& memory_before,
                                       std::int64_t limit, std::vector<PlannedSwap>* swaps);

/// Per-op memory with `swaps` applied (their [free_from, in_start) folded onto one iteration).
std::vector<std::uint64_t> MemoryAfter(const std::vector<std::uint64_t>& before,
                                       const std::vector<PlannedSwap>& swaps);

/// The swap's use folded onto one iteration of `ops` ops (the order key of the in-stream).
std::uint32_t FoldedUse(const PlannedSwap& swap, std::size_t ops);

}  // namespace chameleon::policy::detail
