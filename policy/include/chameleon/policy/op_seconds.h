// The compute time the planner gives each op of a profile.
//
// The paper times only the whole iteration and gives every op the same share. That misleads
// twice. Op costs differ by orders of magnitude: on GPT-2 XL B8 S1024 the optimizer phase is
// 20 % of the ops and 8 % of the time. And the iteration time of a profile recorded under the
// safety net (WARMUP) still holds ~31 ms in which no kernel runs (0.178 s against 0.147 s of
// kernels; most likely waits the executor's measured waits miss), time a plan does not have. With
// both, the plan's predicted swap-in wait at 0.75 of that model's peak was 109 ms against 130 ms
// measured; from the measured op times alone it is 126.5 ms, the allocation wait 91.7 ms
// against 91.5 ms, the step 0.365 s against 0.373 s (docs/policy.md, "Limits"). The daemon's
// profiles carry each op's device time (ProfileOp::device_s, CUDA events around the ops of the
// detailed iteration); traces and older profiles do not, and keep the uniform share.
#pragma once

#include <vector>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// One figure per op. Without measured times (every device_s 0): iteration_s / ops each, summing
/// to iteration_s. With them: each op's measured time, 0 for an op without one (a captured op
/// does not run; another thread's op the shim could not time is rare), and no share of the
/// iteration's time beyond their sum: pessimistic where the device really idles between ops
/// (a launch-bound host), since a transfer would progress meanwhile. Pure.
std::vector<double> OpSeconds(const Profile& profile);

/// True when at least one op of `profile` carries a measured device time.
bool HasOpTimes(const Profile& profile);

}  // namespace chameleon::policy
