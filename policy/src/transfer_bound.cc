#include "chameleon/policy/transfer_bound.h"

#include <algorithm>
#include <cmath>

namespace chameleon::policy {
namespace {

bool PositiveFinite(double v) { return std::isfinite(v) && v > 0; }

bool Valid(const TransferBoundInput& in) {
  return PositiveFinite(in.out_bytes_per_s) && PositiveFinite(in.in_bytes_per_s) &&
         std::isfinite(in.unlimited_s) && std::isfinite(in.forward_s) && in.forward_s >= 0 &&
         in.unlimited_s >= in.forward_s &&
         (in.backward_s < 0 || (std::isfinite(in.backward_s) &&
                                in.forward_s + in.backward_s <= in.unlimited_s * (1 + 1e-12)));
}

/// T_w (see the header). Without a backward time, or with no optimizer state, it is the phases
/// term, which T_b already contains.
double WindowedBound(const TransferBoundInput& in, double x, double a, double bound_s) {
  if (in.backward_s < 0 || in.optimizer_state_bytes == 0) return bound_s;
  const double optimizer_s = std::max(0.0, in.unlimited_s - in.forward_s - in.backward_s);
  const double f = std::max(in.forward_s, a / in.out_bytes_per_s);
  const double b = std::max(in.backward_s, a / in.in_bytes_per_s);
  const double o = std::max({optimizer_s, x / in.out_bytes_per_s - f, x / in.in_bytes_per_s - b});
  // Rounding must not put T_w a hair under T_b, which it never is in exact arithmetic.
  return std::max(bound_s, f + b + o);
}

}  // namespace

const char* ToString(TransferBoundStatus status) {
  switch (status) {
    case TransferBoundStatus::kOk:
      return "ok";
    case TransferBoundStatus::kInfeasible:
      return "infeasible";
    case TransferBoundStatus::kInvalid:
      return "invalid";
  }
  return "invalid";
}

TransferBound ComputeTransferBound(const TransferBoundInput& in) {
  TransferBound out;
  if (!Valid(in)) return out;
  out.excess_bytes = in.peak_bytes > in.limit_bytes ? in.peak_bytes - in.limit_bytes : 0;
  out.across_bytes =
      out.excess_bytes > in.optimizer_state_bytes ? out.excess_bytes - in.optimizer_state_bytes : 0;
  // Saturating: a reserve near 2^64 must not wrap into a small working set.
  const std::uint64_t needed = in.largest_op_bytes > UINT64_MAX - in.reserve_bytes
                                   ? UINT64_MAX
                                   : in.largest_op_bytes + in.reserve_bytes;
  if (in.limit_bytes < needed) {
    out.status = TransferBoundStatus::kInfeasible;
    return out;
  }
  const double x = double(out.excess_bytes);
  const double a = double(out.across_bytes);
  const double rest_s = in.unlimited_s - in.forward_s;
  out.link_s = x / std::min(in.out_bytes_per_s, in.in_bytes_per_s);
  out.phases_s =
      std::max(in.forward_s, a / in.out_bytes_per_s) + std::max(rest_s, a / in.in_bytes_per_s);
  out.bound_s = std::max({in.unlimited_s, out.link_s, out.phases_s});
  out.relative_throughput = out.bound_s > 0 ? in.unlimited_s / out.bound_s : 1.0;
  out.windowed_s = WindowedBound(in, x, a, out.bound_s);
  out.windowed_relative_throughput = out.windowed_s > 0 ? in.unlimited_s / out.windowed_s : 1.0;
  out.status = TransferBoundStatus::kOk;
  return out;
}

namespace {

bool ValidStage(const StageBoundInput& s, double unlimited_s) {
  const bool peer_ok = s.peer_bytes == 0 || (PositiveFinite(s.peer_out_bytes_per_s) &&
                                             PositiveFinite(s.peer_in_bytes_per_s));
  return PositiveFinite(s.out_bytes_per_s) && PositiveFinite(s.in_bytes_per_s) && peer_ok &&
         std::isfinite(s.compute_s) && s.compute_s >= 0 && s.compute_s <= unlimited_s;
}

StageBound BoundOfStage(const StageBoundInput& s, const PipelineBoundInput& in) {
  StageBound b;
  b.excess_bytes = s.peak_bytes > in.limit_bytes ? s.peak_bytes - in.limit_bytes : 0;
  b.peer_bytes = std::min(s.peer_bytes, b.excess_bytes);
  b.host_bytes = b.excess_bytes - b.peer_bytes;
  const std::uint64_t needed = s.largest_op_bytes > UINT64_MAX - in.reserve_bytes
                                   ? UINT64_MAX
                                   : s.largest_op_bytes + in.reserve_bytes;
  b.infeasible = in.limit_bytes < needed;
  // Host and peer links are separate wires: their transfers overlap.
  const double host_s = double(b.host_bytes) / std::min(s.out_bytes_per_s, s.in_bytes_per_s);
  const double peer_s = b.peer_bytes == 0 ? 0.0
                                          : double(b.peer_bytes) / std::min(s.peer_out_bytes_per_s,
                                                                            s.peer_in_bytes_per_s);
  b.link_s = std::max(host_s, peer_s);
  b.bound_s = std::max(s.compute_s, b.link_s);
  return b;
}

}  // namespace

PipelineTransferBound ComputeTransferBound(const PipelineBoundInput& in) {
  PipelineTransferBound out;
  if (in.stages.empty() || !std::isfinite(in.unlimited_s) || in.unlimited_s < 0) return out;
  for (const StageBoundInput& s : in.stages) {
    if (!ValidStage(s, in.unlimited_s)) return out;
  }
  bool infeasible = false;
  for (const StageBoundInput& s : in.stages) {
    out.stages.push_back(BoundOfStage(s, in));
    infeasible = infeasible || out.stages.back().infeasible;
  }
  if (infeasible) {
    out.status = TransferBoundStatus::kInfeasible;
    return out;
  }
  out.bound_s = in.unlimited_s;
  double slowest = -1;
  for (std::size_t i = 0; i < out.stages.size(); ++i) {
    if (out.stages[i].bound_s > slowest) {
      slowest = out.stages[i].bound_s;
      out.slowest_stage = static_cast<int>(i);
    }
  }
  out.bound_s = std::max(in.unlimited_s, slowest);
  out.relative_throughput = out.bound_s > 0 ? in.unlimited_s / out.bound_s : 1.0;
  out.status = TransferBoundStatus::kOk;
  return out;
}

}  // namespace chameleon::policy
