// What the swap-policy generator (generator.h) produces: the planned swaps, the plan with the
// figures that explain it, and why no plan fits when none does. Plain data, shared by the
// generator and its internal passes (search, simulator, infeasibility), which therefore need not
// include the generator's own header. Thread-safe as values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/policy/layers.h"

namespace chameleon::policy {

/// One planned swap of tensor `tensor` over its gap (out_after_op, use_op). The bytes are off the
/// device for ops [free_from_op, in_start_op) and resident again from in_start_op on.
/// Op numbers >= the iteration's op count n denote op (v - n) of the next iteration: a swap
/// across the boundary (wraps() == true) has use_op >= n, and free_from_op / in_start_op may be
/// >= n too; in steady state every iteration runs the same swap, so the bytes are off for ops
/// (v mod n) of [free_from_op, in_start_op).
struct PlannedSwap {
  std::uint32_t tensor = 0;
  std::uint64_t bytes = 0;
  std::uint32_t out_after_op = 0;  ///< last use before the gap: the swap-out starts after it
  /// First op without the bytes: the first op of the layer after the one the swap-out ends in,
  /// or (stalled swap-out) the first op over the limit, which waits for the copy.
  std::uint32_t free_from_op = 0;
  /// The swap-in is issued before this op: the first op of the layer the search chose, or the op
  /// after the last one over the limit when no layer is left between it and the use.
  std::uint32_t in_start_op = 0;
  std::uint32_t use_op = 0;  ///< next use: the compute stream waits for the swap-in here
  double transfer_s = 0;     ///< swap-out: bytes / effective device -> host bandwidth
  double in_transfer_s = 0;  ///< swap-in: bytes / effective host -> device bandwidth
  double stall_s = 0;        ///< predicted wait in total (swap-out + swap-in), 0 when hidden
  /// Part of stall_s spent before free_from_op waiting for the swap-out (the link could not
  /// finish it in time); the rest is spent before use_op waiting for the swap-in.
  double out_stall_s = 0;
  double score = 0;
  /// Device bytes the swap frees: `bytes` rounded up per GeneratorOptions::chunk_bytes (0 in a
  /// hand-made PlannedSwap means `bytes`).
  std::uint64_t device_bytes = 0;
  ipc::Tier tier = ipc::Tier::kHost;
  std::uint16_t helper = 0;
  /// True when the swap crosses the iteration boundary (`ops` = ops in the iteration).
  bool wraps(std::size_t ops) const { return use_op >= ops; }
};

/// A generated plan and the figures that explain it.
struct Plan {
  std::vector<PlannedSwap> swaps;  ///< in the order they were placed (best score first)
  std::vector<Phase> phases;       ///< per op, detected or given
  LayerGrid grid;
  std::vector<std::uint64_t> memory_before;  ///< per op, no swapping
  std::vector<std::uint64_t> memory_after;   ///< per op, with the plan
  std::uint64_t device_limit_bytes = 0;
  /// device_limit_bytes - GeneratorOptions::reserve_bytes: what memory_after stays within.
  std::uint64_t planning_limit_bytes = 0;
  std::uint64_t peak_before_bytes = 0;
  std::uint64_t predicted_peak_bytes = 0;
  /// The compute time the plan is built on: the sum of OpSeconds (op_seconds.h), i.e. the
  /// profile's iteration_s, or its ops' measured device times when it has them.
  double iteration_s = 0;
  /// The plan replayed on the executor's streams (docs/policy.md, "Predicted stall"): the compute
  /// stream's wait for swap-ins before their uses, and for memory whose swap-out is still
  /// copying; their sum, and iteration_s with it. Not the sum of the swaps' stall_s (the search's
  /// per-swap estimate, which counts overlapping waits once per swap).
  double predicted_in_wait_s = 0;
  double predicted_out_wait_s = 0;
  double predicted_stall_s = 0;
  double predicted_iteration_s = 0;  ///< iteration_s + predicted_stall_s
  /// Sum of the swaps' stall_s: what the search minimises in the simulator's model of per-layer
  /// link budgets (the brute-force tests' objective), not a prediction of the measured step.
  double simulated_stall_s = 0;
};

/// A tensor live at the infeasible op that the generator could not take off the device there.
struct UnswappableTensor {
  std::uint32_t tensor = 0;
  std::uint64_t external_id = 0;
  std::uint64_t bytes = 0;
  const char* reason = "";  ///< static string, e.g. "used by this op", "marked unswappable"
};

/// Why no plan fits: the worst remaining op and what blocked the largest tensors live there.
struct Infeasibility {
  std::uint64_t bytes_missing = 0;  ///< at `at_op`, after every useful swap was placed
  std::uint32_t at_op = 0;
  std::uint32_t ops_over_limit = 0;
  std::vector<UnswappableTensor> largest_unswappable;  ///< up to 5, largest first
};

}  // namespace chameleon::policy
