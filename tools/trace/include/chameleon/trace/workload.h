// A trace turned into a replayable workload: the ops that launch device work, in issue order,
// the storage instances (allocations) they read and write, and the iteration boundaries.
// The rules (which ops are kernels, how storage lifetimes are split) are in docs/replay.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/policy/profile.h"
#include "chameleon/trace/storage_instance.h"
#include "chameleon/trace/trace.h"

namespace chameleon::trace {

enum class OpKind : std::uint8_t { kCompute = 0, kCollective = 1 };

/// One device-work op (a kernel, copy or collective).
struct WorkOp {
  std::uint32_t node = 0;   ///< index in Trace::nodes
  std::uint32_t token = 0;  ///< index in Workload::names
  std::uint32_t step = 0;   ///< index in Workload::steps
  OpKind kind = OpKind::kCompute;
  policy::Phase phase = policy::Phase::kUnknown;
  std::vector<std::uint32_t> reads;   ///< storage-instance indices, ascending, unique
  std::vector<std::uint32_t> writes;  ///< storage-instance indices, ascending, unique
  std::int64_t duration_ns = -1;      ///< recorded device time (Kineto), -1 when unknown
  std::string device_name;            ///< its longest recorded device event's name (Kineto)
  std::uint64_t tensor_bytes = 0;  ///< bytes of the CUDA tensors it reads and writes (cost model)
};

/// One iteration: ops [first_op, end_op).
struct Step {
  std::string name;  ///< "ProfilerStep#4", or "whole trace" when the trace has no steps
  std::uint32_t first_op = 0;
  std::uint32_t end_op = 0;
};

/// Value type; not thread-safe for concurrent mutation.
struct Workload {
  std::vector<WorkOp> ops;
  std::vector<StorageInstance> storages;
  std::vector<Step> steps;
  std::vector<std::string> names;  ///< token -> op name, in order of first appearance
};

/// Builds the workload of a parsed trace. Throws TraceError on inconsistent tensor data.
Workload BuildWorkload(const Trace& trace);

/// Live bytes after each op of step `step` when it is replayed alone: persistent storages
/// plus step-local ones from creation to last use. Same length as the step's op range.
std::vector<std::uint64_t> LiveBytesPerOp(const Workload& w, std::size_t step);

/// Peak of LiveBytesPerOp over all steps.
std::uint64_t PeakBytes(const Workload& w);

/// The documented cost model (docs/replay.md) used when no recorded duration is known, equal to
/// simgpu's default timing model (docs/simgpu.md: HBM 1.5 TB/s, 2 us launch latency): an op
/// moves tensor_bytes at kModelHbmBytesPerS and pays kModelLaunchS of launch latency.
inline constexpr double kModelHbmBytesPerS = 1.5e12;
inline constexpr double kModelLaunchS = 2.0e-6;

/// Device seconds of one op: its recorded duration when known, else the cost model.
double OpSeconds(const WorkOp& op);

/// Sum of OpSeconds over the ops of `step`.
double StepSeconds(const Workload& w, std::size_t step);

}  // namespace chameleon::trace
