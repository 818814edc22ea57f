// The transfer bound: the shortest step time any swap policy can reach at a device limit, from
// the host link alone (issue 18 item 7; docs/policy.md "Transfer bound"). scripts/evaluate reads
// it through chameleon-bound, so the evaluation and these tests use the same arithmetic.
//
// With X = peak - limit (bytes that must be off the device at the peak), P = optimizer-state
// bytes (state that is only touched after the peak, so it may leave early and come back late;
// 0 for traces), A = max(0, X - P) (bytes that must leave before the peak and return after it),
// B_out / B_in the device->host / host->device bandwidths, T_f the unlimited step's time up to
// its peak (the forward phase) and T_r the rest:
//
//   T_b = max(T_unlimited, X / min(B_out, B_in), max(T_f, A / B_out) + max(T_r, A / B_in))
//
// The first term: no policy beats unlimited memory. The second: all X bytes cross the link
// twice per step (out and back), on a full-duplex link limited by its slower direction. The
// third: A bytes cannot leave faster than B_out before the peak nor return faster than B_in
// after it. A limit below the largest working set of a single op plus the executor's reserve
// is infeasible for every policy (the op cannot run), reported as kInfeasible, not as a time.
//
// T_b lets the P optimizer-state bytes cross the link at any time of the step. They cannot: each
// is touched by the optimizer phase that ends every step and must be off the device at the next
// peak, so it leaves between its update and the peak (the optimizer phase T_o, then the
// forward) and returns between the peak and its next update (the backward T_bw, then T_o). With
// the phases split (T_unlimited = T_f + T_bw + T_o, inter-step host time counted in T_o, the one
// window both directions share), the windowed bound stretches each phase only as far as its
// transfers force it:
//
//   f = max(T_f, A / B_out)    b = max(T_bw, A / B_in)
//   o = max(T_o, X / B_out - f, X / B_in - b)
//   T_w = f + b + o            (>= T_b; equal when P = 0 or the backward time is not known)
//
// It assumes what the model-shaped trainer does (docs/trainer.md): every other byte live at the
// peak is used both in the forward and in the backward, and the peak ends the forward.
// Pure function; thread-safe.
//
// A pipeline (one stage per device, issue 16; docs/trainer.md "Transfer bound of a pipeline"):
// weights and optimizer state stay clean between micro-batches, so only activations and their
// gradients move. Per stage i with X_i = peak_i - limit, of which V_i (<= X_i) go to a peer GPU
// and H_i = X_i - V_i to the host, each out and back in once per iteration on full-duplex links
// that run side by side:
//
//   link_i = max(H_i / min(B_out_i, B_in_i), V_i / min(P_out_i, P_in_i))
//   T_i    = max(C_i, link_i)           (C_i: the stage's compute time per iteration)
//   T_b    = max(T_unlimited, max_i T_i)
//
// The slowest stage sets the node's iteration (1F1B cannot run ahead of its slowest stage).
#pragma once

#include <cstdint>
#include <vector>

namespace chameleon::policy {

struct TransferBoundInput {
  std::uint64_t peak_bytes = 0;             ///< the unlimited step's peak device memory
  std::uint64_t limit_bytes = 0;            ///< the device limit
  std::uint64_t optimizer_state_bytes = 0;  ///< P (0 for traces)
  double out_bytes_per_s = 0;               ///< B_out, device -> host
  double in_bytes_per_s = 0;                ///< B_in, host -> device
  double unlimited_s = 0;                   ///< T_unlimited, the unlimited step time
  double forward_s = 0;                     ///< T_f, up to the peak (<= unlimited_s)
  /// T_bw, the backward phase (forward_s + backward_s <= unlimited_s); < 0: not known, and the
  /// windowed bound is then T_b.
  double backward_s = -1;
  std::uint64_t largest_op_bytes = 0;  ///< the largest working set of a single op
  std::uint64_t reserve_bytes = 0;     ///< the executor's reserve on the device
};

enum class TransferBoundStatus : std::uint8_t {
  kOk,          ///< bound_s is the bound
  kInfeasible,  ///< limit < largest_op_bytes + reserve_bytes: no policy can run the step
  kInvalid,     ///< inputs out of range (bandwidth <= 0, times negative or T_f > T_unlimited)
};

struct TransferBound {
  TransferBoundStatus status = TransferBoundStatus::kInvalid;
  double bound_s = 0;              ///< T_b (kOk only)
  std::uint64_t excess_bytes = 0;  ///< X
  std::uint64_t across_bytes = 0;  ///< A
  double link_s = 0;               ///< X / min(B_out, B_in)
  double phases_s = 0;             ///< max(T_f, A / B_out) + max(T_r, A / B_in)
  double windowed_s = 0;           ///< T_w, the windowed bound (>= bound_s; kOk only)
  /// T_unlimited / T_b: the best throughput relative to unlimited memory (kOk only).
  double relative_throughput = 0;
  double windowed_relative_throughput = 0;  ///< T_unlimited / T_w (kOk only)
};

/// "ok", "infeasible" or "invalid".
const char* ToString(TransferBoundStatus status);

/// T_b and its terms for `in` (see the file comment).
TransferBound ComputeTransferBound(const TransferBoundInput& in);

/// One pipeline stage on its own device.
struct StageBoundInput {
  std::uint64_t peak_bytes = 0;        ///< peak_i, the stage's unlimited peak on its device
  double compute_s = 0;                ///< C_i, the stage's busy time per iteration (unlimited)
  double out_bytes_per_s = 0;          ///< B_out_i, device -> host
  double in_bytes_per_s = 0;           ///< B_in_i, host -> device
  std::uint64_t peer_bytes = 0;        ///< V_i requested: bytes placed on a peer (capped at X_i)
  double peer_out_bytes_per_s = 0;     ///< P_out_i, this device -> the peer (V_i > 0 only)
  double peer_in_bytes_per_s = 0;      ///< P_in_i, the peer -> this device
  std::uint64_t largest_op_bytes = 0;  ///< the largest working set of one of the stage's ops
};

struct PipelineBoundInput {
  std::vector<StageBoundInput> stages;
  std::uint64_t limit_bytes = 0;    ///< the per-device limit
  std::uint64_t reserve_bytes = 0;  ///< the executor's reserve on each device
  double unlimited_s = 0;           ///< T_unlimited, the unlimited iteration (bubbles included)
};

struct StageBound {
  std::uint64_t excess_bytes = 0;  ///< X_i
  std::uint64_t host_bytes = 0;    ///< H_i
  std::uint64_t peer_bytes = 0;    ///< V_i
  double link_s = 0;               ///< link_i
  double bound_s = 0;              ///< T_i
  bool infeasible = false;         ///< limit < largest_op_bytes + reserve_bytes
};

struct PipelineTransferBound {
  TransferBoundStatus status = TransferBoundStatus::kInvalid;
  double bound_s = 0;              ///< T_b (kOk only)
  int slowest_stage = -1;          ///< the i with the largest T_i (the first on ties; kOk only)
  double relative_throughput = 0;  ///< T_unlimited / T_b (kOk only)
  std::vector<StageBound> stages;  ///< per stage (filled for kOk and kInfeasible)
};

/// T_b of a pipeline at a per-device limit (see the file comment). kInvalid for no stages, a
/// bandwidth <= 0 where bytes would cross it, or times out of range (C_i > T_unlimited);
/// kInfeasible when any stage cannot run its largest op under the limit.
PipelineTransferBound ComputeTransferBound(const PipelineBoundInput& in);

}  // namespace chameleon::policy
