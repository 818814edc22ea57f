// The working-set bound: the least stall a limit forces where the tensors of nearby ops of a
// profile do not fit together, for a policy that moves whole tensors and cannot tell which of an
// op's tensors the op writes (this shim: a launch names its pointers, not their direction).
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
// a copy) and K = R(i) \ R(i+1) \ F, of which only the live ones count (a tensor whose content is
// never read again, or whose next use only writes it, may be dropped without a copy):
//
//   E_i = |R(i+1)| + |K| - limit          bytes of K that must be out before op i + 1 starts
//   M_i = min { |S| : S subset of K, |S| >= E_i }   whole tensors (exact for |K| <= 16, else E_i)
//
// The stalls fall between different pairs of ops, so they add up, and no op computes during
// them: T >= compute + sum_i M_i / B_out, with compute the sum of OpSeconds (the measured op
// times, else the profile's iteration time, which assumes the device busy for all of it).
//
// The bytes that left must come back, and a tensor may be pushed out for a stretch of ops rather
// than between two: with per-op times (the daemon's detailed profile, a replay's) the bound also
// takes **tensor windows**. Between two uses of tensor t, the second reading it, every op whose
// own tensors leave no room for t (|R(k)| + |t| > limit) forces t out after the first use and
// before the first such op, and back after the last such op and before the second use. An
// interval of ops lasts at least as long as the copies whose windows it contains take on their
// link (each direction its own), and its ops compute for their own time only: the difference is
// stall. Disjoint intervals add up; the best sum is a dynamic programme (stall_windows.h), which
// contains the pairs' M_i as zero-length windows. Op times are lower bounds (no run is faster),
// and idle gaps between ops count as stall-free time the copies may use, which the programme
// already gives them, so the sum stays a bound. Without op times the windows are not used (an
// even split of the iteration would not be a lower bound per op).
//
// Untracked bytes, chunk rounding and the executor's reserve only add to the memory needed, so
// leaving them out keeps the bound a bound; whole tensors move (as this shim's policies move
// them). Pure; thread-safe.
#pragma once

#include <cstdint>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

struct WorkingSetBound {
  /// False when some op's own tensors (with those allocated for it) exceed the limit: no policy
  /// can run it. `worst_op` is then that op.
  bool feasible = true;
  double compute_s = 0;              ///< sum of OpSeconds
  double stall_s = 0;                ///< the least stall: pairs and tensor windows together
  double bound_s = 0;                ///< compute_s + stall_s
  double pair_stall_s = 0;           ///< sum of M_i / B_out (the pairs alone)
  bool windowed = false;             ///< tensor windows were taken (the profile has op times)
  std::uint32_t tensor_windows = 0;  ///< tensor windows found (each an out and an in copy)
  std::uint64_t out_bytes = 0;       ///< sum of M_i
  std::uint32_t boundaries = 0;      ///< pairs of ops with M_i > 0
  std::int64_t worst_op = -1;        ///< the op i with the largest M_i (or the infeasible op)
  std::uint64_t worst_bytes = 0;     ///< that M_i
};

/// The bound of `profile` at `limit_bytes` with `out_bytes_per_s` (> 0) from the device to
/// wherever the bytes go and `in_bytes_per_s` back. Validate an untrusted profile first
/// (ValidateProfile); a tensor index out of range is ignored here. Every tensor is counted on one
/// device (project a multi-device profile first: device_profile.h).
WorkingSetBound ComputeWorkingSetBound(const Profile& profile, std::uint64_t limit_bytes,
                                       double out_bytes_per_s, double in_bytes_per_s);

}  // namespace chameleon::policy
