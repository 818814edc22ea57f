// Joining a Kineto (Chrome trace) file to an execution trace, for recorded kernel names and
// durations. Path: Kineto device event (kernel / gpu_memcpy / gpu_memset) --args.correlation-->
// the CPU launch (cuda_runtime / cuda_driver; ac2g flow events carry the same id) --innermost
// enclosing cpu_op on the launching thread--> its record-function id --> the ET node with that
// rf_id --> the workload op (the node itself, else its first device-work descendant, else its
// device-work ancestor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "chameleon/trace/trace.h"
#include "chameleon/trace/workload.h"

namespace chameleon::trace {

/// What the join found; every device event is accounted for in exactly one counter.
struct KinetoJoinStats {
  std::size_t cpu_ops = 0;  ///< Kineto cpu_op events
  std::size_t rf_id_name_match =
      0;  ///< cpu_ops whose ET node (rf_id = Ev Idx - 1) has the same name
  std::size_t rf_id_name_mismatch = 0;
  std::size_t rf_id_missing = 0;      ///< cpu_ops with no ET node of that rf_id
  std::size_t device_events = 0;      ///< kernels + memcpys + memsets
  std::size_t kernels = 0;            ///< device events with cat == "kernel"
  std::size_t joined = 0;             ///< device events attributed to a workload op
  std::size_t no_launch = 0;          ///< no CPU launch with that correlation id
  std::size_t no_cpu_op = 0;          ///< launch outside any cpu_op
  std::size_t no_node = 0;            ///< cpu_op not in the ET
  std::size_t no_op = 0;              ///< ET node with no device-work op around it
  std::size_t ops_with_duration = 0;  ///< workload ops that received a duration
};

/// Reads `kineto_path` (gzip or plain) and sets WorkOp::duration_ns (sum of the op's device
/// events) and WorkOp::device_name (its longest event's name) for every joined op; ops without
/// events keep -1. The record-function id of a cpu_op
/// is args["Record function id"] when present, else args["Ev Idx"] - 1 (true for the shared
/// Megatron pair, see the tests). Throws TraceError naming the file and event on bad input.
KinetoJoinStats JoinKineto(const Trace& trace, const std::string& kineto_path, Workload* w);

}  // namespace chameleon::trace
