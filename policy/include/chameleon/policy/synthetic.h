// Synthetic, transformer-like iteration profiles for tests, benchmarks and demos: repeated layers
// whose forward saves activations that the backward re-reads in reverse order, parameters live
// across iterations, gradients consumed by an optimizer. Deterministic for a given spec.
#pragma once

#include <cstdint>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

struct SyntheticSpec {
  std::uint32_t layers = 24;
  std::uint32_t ops = 10'000;                   ///< approximate ops in the iteration
  std::uint32_t tensors = 20'000;               ///< approximate tensors (activations fill the rest)
  std::uint64_t activation_bytes = 8ull << 20;  ///< base size; sizes cycle ×1, ×2, ×3
  std::uint64_t param_bytes = 16ull << 20;
  double saved_fraction = 0.5;  ///< activations kept for the backward
  double iteration_s = 1.0;
  std::uint64_t seed = 1;
  bool label_phases = true;  ///< false: every op kUnknown (exercises phase detection)
};

/// Builds the profile; ops carry tokens (16 forward kernels, 16 backward, loss, optimizer).
Profile MakeTransformerProfile(const SyntheticSpec& spec);

/// A copy of `profile` with round(fraction × ops) extra ops inserted at pseudo-random places,
/// each with a token drawn from the existing ones; every other inserted op writes and reads a
/// fresh small tensor (appended after the original tensors, which keep their indices).
Profile InsertOps(const Profile& profile, double fraction, std::uint64_t seed);

}  // namespace chameleon::policy
