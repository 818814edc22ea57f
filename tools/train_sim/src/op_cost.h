// What the real kernel behind each sampled op would cost on a GPU: FLOPs, HBM bytes and
// GPU-to-GPU link bytes, from the op's shapes (docs/trainer.md, "Timing model"). bf16 tensors.
#pragma once

#include <cstddef>

#include "sampled_launcher.h"

namespace chameleon::train_sim::cost {

inline constexpr double kBf16 = 2.0;

/// The cost part of a SampledOp.
struct Cost {
  double flops = 0;
  double bytes = 0;
  double link_bytes = 0;
};

/// [m, k] x [k, n] in bf16: 2mkn FLOPs, both operands read and the result written once.
inline Cost Gemm(double m, double k, double n) {
  return {2 * m * k * n, kBf16 * (m * k + k * n + m * n), 0};
}

/// A memory-bound op that touches `bytes` in total (reads plus writes).
inline Cost Memory(double bytes, double flops = 0) { return {flops, bytes, 0}; }

/// Ring collectives on `tp` GPUs over a tensor of `full_bytes` (its unsharded size): an
/// all-gather or reduce-scatter moves (tp-1)/tp of it through each GPU's link, an all-reduce
/// twice that. HBM traffic: the tensor read and written once.
inline Cost AllGather(double full_bytes, int tp) {
  return {0, 2 * full_bytes, full_bytes * (tp - 1) / tp};
}
inline Cost ReduceScatter(double full_bytes, int tp) { return AllGather(full_bytes, tp); }
inline Cost AllReduce(double full_bytes, int tp) {
  return {full_bytes / tp * (tp - 1), 2 * full_bytes, 2 * full_bytes * (tp - 1) / tp};
}

inline Cost operator+(Cost a, const Cost& b) {
  return {a.flops + b.flops, a.bytes + b.bytes, a.link_bytes + b.link_bytes};
}

}  // namespace chameleon::train_sim::cost
