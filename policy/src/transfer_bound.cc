#include "chameleon/policy/transfer_bound.h"

#include <algorithm>
#include <cmath>

namespace chameleon::policy {
namespace {

bool PositiveFinite(double v) { return std::isfinite(v) && v > 0; }

bool Valid(const TransferBoundInput& in) {
  return PositiveFinite(in.out_bytes_per_s) && PositiveFinite(in.in_bytes_per_s) &&
         std::isfinite(in.unlimited_s) && std::isfinite(in.forward_s) && in.forward_s >= 0 &&
         in.unlimited_s >= in.forward_s;
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
  out.status = TransferBoundStatus::kOk;
  return out;
}

}  // namespace chameleon::policy
