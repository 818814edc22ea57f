// policy::Profile straight from a trace, without replaying it: what the policy library's tests
// use to run policies on the shared real traces.
#pragma once

#include <cstddef>
#include <string>

#include "chameleon/policy/profile.h"
#include "chameleon/trace/trace.h"
#include "chameleon/trace/workload.h"

namespace chameleon::trace {

/// The detailed profile of iteration `step` of `w` (ops, tensors, bytes live after each op).
/// Tensors are the persistent storages (alloc_op = free_op = -1; included even when this step
/// does not touch them, since they occupy memory) followed by the step's own storages.
/// iteration_s: pass a measured time, or a negative value to use StepSeconds (recorded
/// Kineto durations where joined, else the cost model). Throws std::out_of_range on a bad step.
policy::Profile BuildProfile(const Trace& trace, const Workload& w, std::size_t step,
                             double iteration_s = -1);

/// ReadTrace + BuildWorkload + BuildProfile(step). `step` defaults to the last recorded
/// iteration (steady state: the first one may still create optimizer state).
policy::Profile ProfileFromTraceFile(const std::string& path, std::size_t step = SIZE_MAX);

}  // namespace chameleon::trace
