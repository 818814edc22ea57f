// Command line of chameleon-train-sim (docs/trainer.md).
#pragma once

#include <cstdint>
#include <string>

#include "allocator.h"
#include "model_spec.h"

namespace chameleon::train_sim {

/// Tokens are bytes: a 256-entry vocabulary.
inline constexpr int kVocab = 256;

struct Options {
  int layers = 2;
  int hidden = 64;
  int seq = 32;
  int batch = 4;
  int steps = 10;
  std::uint64_t seed = 1;
  bool recompute = false;
  int dynamic = 0;  ///< K: auxiliary branch toggles every K steps; 0 = static
  AllocStyle alloc = AllocStyle::kTensor;
  bool pointer_table = false;  ///< one gather per step through a device-side pointer table
  int corrupt_at_step = -1;    ///< test hook: flip a weight byte before step N (N == steps: at end)
  // Hooks for multi-process tests (run_hooks.h), real-arithmetic mode only.
  std::string stop_file;  ///< the run ends before the first step at which it exists
  std::string grow_file;  ///< once it exists, grow_bytes more device memory are taken
  std::uint64_t grow_bytes = 0;

  // Model-shaped mode (--model): the architecture and per-GPU shard; empty name = the
  // real-arithmetic mode above.
  std::string model;
  ShapeSpec shape;
  // --pipeline N --micro-batches M (--model only): N stages on N devices, 1F1B over M
  // micro-batches per step. `pipelined`: either option was given (the pipeline trainer runs).
  int pipeline = 1;
  int micro_batches = 1;
  bool pipelined = false;

  // Derived.
  int heads = 1;
  int head_dim = 64;
};

/// Result of parsing: exit code to return at once (help, usage error) or -1 to run.
struct ParseResult {
  int exit_code = -1;
};

/// Parses and validates argv; prints help or a clear error itself.
ParseResult ParseOptions(int argc, char** argv, Options* options);

/// Schedule of --dynamic K (documented in docs/trainer.md): the auxiliary branch is on in odd
/// K-step phases; the optimizer step is skipped (as after a loss-scaling overflow) at step
/// N % K == K / 2 of every third phase.
bool AuxBranchOn(const Options& options, int step);
bool SkipOptimizerStep(const Options& options, int step);

}  // namespace chameleon::train_sim
