// Synthetic op-token streams shaped like a transformer training loop, with ground truth:
// where each step starts, how many ops it has and at which steps the op sequence changed.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace chameleon::daemon::testing {

struct LoopSpec {
  int layers = 6;
  int prelude_ops = 80;     ///< set-up ops before the first step (weight uploads, init kernels)
  double perturb_rate = 0;  ///< per op: probability of inserting a noise op or removing the op
  int dynamic = 0;  ///< K > 0: aux branch on for K steps, off for K; optimizer skipped sometimes
  std::uint64_t seed = 1;
};

struct SyntheticStream {
  std::vector<std::uint32_t> tokens;
  std::vector<std::size_t> step_starts;  ///< index of each step's first op in tokens
  std::vector<std::size_t> step_ops;     ///< unperturbed ops of each step
  std::vector<int> shift_steps;  ///< steps whose unperturbed sequence differs from the previous
};

/// Tokens 1 and 2 are host-to-device and device-to-host copies, 5 a memset, kernels from 16 on,
/// noise ops 200..209 (never part of the loop itself).
inline std::vector<std::uint32_t> StepOps(const LoopSpec& spec, int step) {
  const bool aux = spec.dynamic > 0 && (step / spec.dynamic) % 2 == 1;
  const bool skip =
      spec.dynamic > 0 && step % spec.dynamic == spec.dynamic / 2 && (step / spec.dynamic) % 3 == 2;
  std::vector<std::uint32_t> ops{1, 1, 20};  // batch upload, embedding
  for (int l = 0; l < spec.layers; ++l) {
    for (std::uint32_t t : {30u, 31u, 32u, 33u, 34u, 35u}) ops.push_back(t);
    if (aux)
      for (std::uint32_t t : {70u, 71u, 31u}) ops.push_back(t);
  }
  for (std::uint32_t t : {40u, 41u, 42u}) ops.push_back(t);  // loss forward + backward start
  for (int l = 0; l < spec.layers; ++l) {
    for (std::uint32_t t : {50u, 31u, 51u, 31u, 52u, 53u, 54u, 55u}) ops.push_back(t);
    if (aux)
      for (std::uint32_t t : {72u, 31u}) ops.push_back(t);
  }
  ops.push_back(21);  // embedding backward
  if (!skip) {
    for (int p = 0; p < 2 * spec.layers + 2; ++p) ops.push_back(60);
    ops.push_back(61);
  }
  ops.push_back(2);  // loss to host
  return ops;
}

inline SyntheticStream MakeLoop(const LoopSpec& spec, int steps) {
  SyntheticStream s;
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < spec.prelude_ops; ++i) {
    const std::uint32_t init[] = {1, 1, 1, 5, 80, 81, 82, 1, 60};
    s.tokens.push_back(init[rng() % 9]);
  }
  std::vector<std::uint32_t> previous;
  for (int step = 0; step < steps; ++step) {
    std::vector<std::uint32_t> ops = StepOps(spec, step);
    if (step > 0 && ops != previous) s.shift_steps.push_back(step);
    s.step_starts.push_back(s.tokens.size());
    s.step_ops.push_back(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const double r = unit(rng);
      // Never perturb the first op of a step: the ground-truth start must stay where it is.
      if (i > 0 && r < spec.perturb_rate / 2) continue;  // removed
      s.tokens.push_back(ops[i]);
      if (i > 0 && r > 1 - spec.perturb_rate / 2) s.tokens.push_back(200 + rng() % 10);  // inserted
    }
    previous = std::move(ops);
  }
  return s;
}

}  // namespace chameleon::daemon::testing
