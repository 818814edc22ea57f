// The working-set bound: the least stall a limit forces between two consecutive ops of a
// profile, for a policy that moves whole tensors and cannot tell which of an op's tensors the op
// writes (this shim: a launch names its pointers, not their direction).
//
// Why a second bound: the transfer bound (transfer_bound.h) counts bytes against link time and
// lets every transfer overlap compute. At a low limit that is not possible: when op i's tensors
// and op i+1's tensors do not fit together, some of op i's must leave after op i ends (a copy
// cannot start before the last kernel that may write its tensor) and before op i+1 starts, while
// the compute stream waits. On the Megatron trace at a quarter of its peak the attention's
// scores, a buffer and the probabilities (805 MB against 729 MB) force one 268 MB tensor out in
// each of 40 layers: 0.43 s a step at 25 GB/s, where the transfer bound says 1.0x unlimited
// (docs/policy.md "Working-set bound").
//
// At the boundary between op i and op i + 1, with R(k) the tensors op k reads or writes (plus
// those allocated just before op i + 1), F the tensors freed right after op i (they leave without
// a copy) and K = R(i) \ R(i+1) \ F:
//
//   E_i = |R(i+1)| + |K| - limit          bytes of K that must be out before op i + 1 starts
//   M_i = min { |S| : S subset of K, |S| >= E_i }   whole tensors (exact for |K| <= 16, else E_i)
//   stall >= sum_i M_i / B_out
//
// The stalls fall between different pairs of ops, so they add up, and no op computes during
// them: T >= compute + stall, with compute the sum of OpSeconds (the measured op times, else the
// profile's iteration time, which assumes the device busy for all of it). Only the outward
// copies are counted: the bytes that left must come back before their next use too, but that
// copy may overlap compute. Untracked bytes, chunk rounding and the executor's reserve only add
// to the memory needed, so leaving them out keeps the bound a bound. Pure; thread-safe.
#pragma once

#include <cstdint>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

struct WorkingSetBound {
  /// False when some op's own tensors (with those allocated for it) exceed the limit: no policy
  /// can run it. `worst_op` is then that op.
  bool feasible = true;
  double compute_s = 0;           ///< sum of OpSeconds
  double stall_s = 0;             ///< sum of M_i / B_out
  double bound_s = 0;             ///< compute_s + stall_s
  std::uint64_t out_bytes = 0;    ///< sum of M_i
  std::uint32_t boundaries = 0;   ///< pairs of ops with M_i > 0
  std::int64_t worst_op = -1;     ///< the op i with the largest M_i (or the infeasible op)
  std::uint64_t worst_bytes = 0;  ///< that M_i
};

/// The bound of `profile` at `limit_bytes` with `out_bytes_per_s` (> 0) from the device to
/// wherever the bytes go. Validate an untrusted profile first (ValidateProfile); a tensor index
/// out of range is ignored here. Every tensor is counted on one device (project a multi-device
/// profile first: device_profile.h).
WorkingSetBound ComputeWorkingSetBound(const Profile& profile, std::uint64_t limit_bytes,
                                       double out_bytes_per_s);

}  // namespace chameleon::policy
