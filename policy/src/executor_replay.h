// Internal: what a plan costs on the shim's executor, replayed in stream order.
//
// The simulator (simulator.h) places each swap against per-layer link budgets on its own and
// charges it whatever its layers could not carry, so the stalls of a plan add up swap by swap.
// On the device they do not: while the compute stream waits for one swap-in, the link keeps
// moving the next ones, and the in-stream serves swap-ins one after the other. Summed, the
// stalls of a transfer-bound plan came out 2-3x the measured wait (GPT-2 XL B8 S1024 on
// h200-sxm at 0.75 of its peak: 447 ms predicted, 130 ms of swap-in wait measured). This replay
// follows the executor instead (docs/policy.md, "Predicted stall"):
//   - one compute stream running the ops in order, each taking its op_seconds.h figure (measured
//     where the profile has op times, the paper's uniform share otherwise, as for the layers);
//   - one out-stream and one in-stream, FIFO, each copy taking bytes / the direction's achieved
//     bandwidth (no link_efficiency: that is a planning margin, not a rate);
//   - a pool of freed device bytes, taken oldest first as ChunkPool::Take does, each piece with
//     the time it became free on the device (a free: the end of its op; a swap-out: the end of
//     its copy). An allocation waits for its pieces on the compute stream (the swap-out wait); a
//     swap-in waits for them on the in-stream;
//   - a swap-in issued before op in_start_op starts no earlier than that op could (the host
//     issues it then) and the op using the tensor waits for it (the swap-in wait).
// Steady state: the swaps that cross the iteration boundary start off the device, and the
// figures are those of the last of a few replayed iterations.
#pragma once

#include <vector>

#include "chameleon/policy/options.h"
#include "chameleon/policy/plan.h"
#include "chameleon/policy/profile.h"

namespace chameleon::policy::detail {

struct ReplayedIteration {
  double iteration_s = 0;  ///< compute time + both waits
  double in_wait_s = 0;    ///< compute stream waiting for swap-ins before their uses
  double out_wait_s = 0;   ///< compute stream waiting for memory a swap-out still copies
};

/// Replays `swaps` (host tier, as GeneratePlan returns them) over `profile`'s iteration, op i
/// taking `op_s[i]` of compute, with `options`' bandwidths, chunk_bytes and min_swap_bytes.
/// O((ops + tensors + swaps) · iterations + pieces). `profile` must be valid (ValidateProfile).
ReplayedIteration ReplayOnExecutor(const Profile& profile, const std::vector<PlannedSwap>& swaps,
                                   const GeneratorOptions& options,
                                   const std::vector<double>& op_s);

}  // namespace chameleon::policy::detail
