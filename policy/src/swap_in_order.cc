#include "swap_in_order.h"

#include <algorithm>

#include "excess_tree.h"

namespace chameleon::policy::detail {
namespace {

std::int64_t DeviceBytesOf(const PlannedSwap& s) {
  return static_cast<std::int64_t>(s.device_bytes != 0 ? s.device_bytes : s.bytes);
}

// Adds `bytes` to the ops of [first, end) folded onto one iteration of `n` ops (end - first <= n).
void AddFolded(ExcessTree* tree, std::size_t n, std::uint32_t first, std::uint32_t end,
               std::int64_t bytes) {
  if (end <= first) return;
  if (first >= n) first -= std::uint32_t(n), end -= std::uint32_t(n);
  if (end <= n) {
    tree->Add(first, end - 1, bytes);
  } else {
    tree->Add(first, std::uint32_t(n) - 1, bytes);
    tree->Add(0, end - std::uint32_t(n) - 1, bytes);
  }
}

}  // namespace

std::size_t DropSwapsRedundantUntilUse(const std::vector<std::uint64_t>& memory_before,
                                       std::int64_t limit, std::vector<PlannedSwap>* swaps) {
  const std::size_t n = memory_before.size();
  if (n == 0 || swaps->empty()) return 0;
  // The swaps OrderSwapInsByUse re-issues (swap-in and use in one iteration); the others keep
  // their swap-in op, so only their placed relief counts. A range longer than an iteration is
  // left alone too (hand-made plans only).
  const auto usable = [n](const PlannedSwap& s) {
    return (s.in_start_op < n) == (s.use_op < n) && s.free_from_op <= s.in_start_op &&
           s.in_start_op <= s.use_op && s.use_op - s.free_from_op <= n;
  };
  std::vector<std::int64_t> excess(n);
  for (std::size_t i = 0; i < n; ++i)
    excess[i] = static_cast<std::int64_t>(memory_before[i]) - limit;
  ExcessTree tree(excess);
  for (const PlannedSwap& s : *swaps) {
    if (usable(s)) {
      AddFolded(&tree, n, s.free_from_op, s.use_op, -DeviceBytesOf(s));
    } else {
      AddFolded(&tree, n, s.free_from_op, s.in_start_op, -DeviceBytesOf(s));
    }
  }
  if (tree.Max() > 0) return 0;  // not a plan that fits: nothing to judge redundancy by
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < swaps->size(); ++i) {
    if (usable((*swaps)[i])) order.push_back(i);
  }
  const auto placed = [&](std::uint32_t i) {
    return (*swaps)[i].in_start_op - (*swaps)[i].free_from_op;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (placed(a) != placed(b)) return placed(a) < placed(b);
    return DeviceBytesOf((*swaps)[a]) > DeviceBytesOf((*swaps)[b]);
  });
  std::vector<bool> drop(swaps->size(), false);
  for (std::uint32_t i : order) {
    const PlannedSwap& s = (*swaps)[i];
    AddFolded(&tree, n, s.free_from_op, s.use_op, DeviceBytesOf(s));
    if (tree.Max() <= 0) {
      drop[i] = true;
      continue;
    }
    AddFolded(&tree, n, s.free_from_op, s.use_op, -DeviceBytesOf(s));  // needed after all
  }
  std::size_t dropped = 0;
  std::vector<PlannedSwap> kept;
  kept.reserve(swaps->size());
  for (std::size_t i = 0; i < swaps->size(); ++i) {
    if (drop[i]) {
      ++dropped;
    } else {
      kept.push_back((*swaps)[i]);
    }
  }
  *swaps = std::move(kept);
  return dropped;
}

std::vector<std::uint64_t> MemoryAfter(const std::vector<std::uint64_t>& before,
                                       const std::vector<PlannedSwap>& swaps) {
  const std::size_t n = before.size();
  std::vector<std::int64_t> diff(n + 1, 0);
  const auto off = [&](std::size_t first, std::size_t end, std::int64_t bytes) {
    diff[first] -= bytes;
    diff[end] += bytes;
  };
  for (const PlannedSwap& s : swaps) {
    const std::int64_t bytes = DeviceBytesOf(s);
    if (s.in_start_op <= n) {
      off(s.free_from_op, s.in_start_op, bytes);
    } else if (s.free_from_op >= n) {
      off(s.free_from_op - n, s.in_start_op - n, bytes);
    } else {
      off(s.free_from_op, n, bytes);
      off(0, s.in_start_op - n, bytes);
    }
  }
  std::vector<std::uint64_t> after(n);
  std::int64_t delta = 0;
  for (std::size_t i = 0; i < n; ++i) {
    delta += diff[i];
    after[i] = static_cast<std::uint64_t>(static_cast<std::int64_t>(before[i]) + delta);
  }
  return after;
}

std::uint32_t FoldedUse(const PlannedSwap& swap, std::size_t ops) {
  return swap.use_op >= ops ? static_cast<std::uint32_t>(swap.use_op - ops) : swap.use_op;
}

std::size_t OrderSwapInsByUse(const std::vector<std::uint64_t>& memory_before, std::int64_t limit,
                              std::vector<PlannedSwap>* swaps) {
  const std::size_t n = memory_before.size();
  if (n == 0 || swaps->empty()) return 0;
  std::vector<std::int64_t> excess(n);
  const std::vector<std::uint64_t> after = MemoryAfter(memory_before, *swaps);
  for (std::size_t i = 0; i < n; ++i) excess[i] = static_cast<std::int64_t>(after[i]) - limit;
  ExcessTree tree(excess);
  // Only swaps whose swap-in and use lie in the same iteration take part (all of them in the
  // plans the simulator makes; the guard keeps a hand-made one from folding wrongly).
  const auto same_frame = [n](const PlannedSwap& s) {
    return (s.in_start_op < n) == (s.use_op < n) && s.in_start_op <= s.use_op;
  };
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < swaps->size(); ++i) {
    if (same_frame((*swaps)[i])) order.push_back(i);
  }
  const auto folded = [n](std::uint32_t op) { return op >= n ? op - std::uint32_t(n) : op; };
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const PlannedSwap &x = (*swaps)[a], &y = (*swaps)[b];
    if (FoldedUse(x, n) != FoldedUse(y, n)) return FoldedUse(x, n) < FoldedUse(y, n);
    return folded(x.in_start_op) < folded(y.in_start_op);
  });
  // First every swap-in of the pass is taken back to its use (the bytes stay off until then),
  // so that the earliest room after the peak goes to the earliest use, not to whichever swap
  // the search placed there first.
  const auto in_of = [&](const PlannedSwap& s) { return folded(s.in_start_op); };
  for (std::uint32_t i : order) {
    const PlannedSwap& s = (*swaps)[i];
    const std::uint32_t in = in_of(s), use = FoldedUse(s, n);
    if (use > in) tree.Add(in, use - 1, -DeviceBytesOf(s));
  }
  std::size_t moved = 0;
  std::uint32_t previous = 0;  // the folded in op of the previous swap-in in use order
  for (std::uint32_t i : order) {
    PlannedSwap& s = (*swaps)[i];
    const bool next_iteration = s.in_start_op >= n;
    const std::uint32_t in = in_of(s), use = FoldedUse(s, n);
    const std::int64_t bytes = DeviceBytesOf(s);
    // The earliest op the swap-in may be issued before: the one after the first op without the
    // bytes (out_after < free_from < in_start, the trigger order the shim relies on); a wrapped
    // swap's bytes are off from the previous iteration on, so op 0 of this one.
    std::uint32_t lower = 0;
    if (!next_iteration || s.free_from_op >= n) lower = folded(s.free_from_op) + 1;
    if (lower > use) lower = use;
    // The earliest op from which on the bytes fit back up to the use; the old op always does.
    std::uint32_t earliest = use;
    if (use > lower) {
      tree.Add(lower, use - 1, bytes);
      const std::int64_t over = tree.LastPositive(lower, use - 1);
      tree.Add(lower, use - 1, -bytes);
      earliest = over < 0 ? lower : static_cast<std::uint32_t>(over + 1);
    }
    const std::uint32_t at = std::min(std::max(previous, earliest), use);
    if (use > at) tree.Add(at, use - 1, bytes);
    if (at != in) {
      s.in_start_op = next_iteration ? at + static_cast<std::uint32_t>(n) : at;
      ++moved;
    }
    previous = at;
  }
  return moved;
}

}  // namespace chameleon::policy::detail
