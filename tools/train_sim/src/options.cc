#include "options.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <limits>

namespace chameleon::train_sim {
namespace {

constexpr int kHeadDim = 64;

// Every kernel indexes with int32 element counts; refuse shapes that would overflow them.
bool FitsInt32(double elements) {
  return elements <= static_cast<double>(std::numeric_limits<std::int32_t>::max());
}

const char* Validate(Options* o) {
  if (o->hidden >= kHeadDim && o->hidden % kHeadDim != 0) {
    return "--hidden must be below 64 (one head) or a multiple of 64 (heads of 64)";
  }
  o->heads = o->hidden < kHeadDim ? 1 : o->hidden / kHeadDim;
  o->head_dim = o->hidden / o->heads;
  const double rows = static_cast<double>(o->batch) * o->seq;
  const double h = o->hidden;
  if (!FitsInt32(rows * 4 * h) || !FitsInt32(rows * kVocab) || !FitsInt32(4 * h * h) ||
      !FitsInt32(static_cast<double>(o->batch) * o->heads * o->seq * o->seq)) {
    return "model too large: a tensor would exceed 2^31 elements";
  }
  if (o->corrupt_at_step > o->steps) return "--corrupt-at-step must be at most --steps";
  return nullptr;
}

}  // namespace

ParseResult ParseOptions(int argc, char** argv, Options* o) {
  CLI::App app{
      "chameleon-train-sim: a small transformer with real fp32 arithmetic, trained on "
      "the CUDA driver API (simgpu). Output format: docs/trainer.md."};
  app.add_option("--layers", o->layers, "transformer layers")->check(CLI::Range(1, 256));
  app.add_option("--hidden", o->hidden, "hidden size (< 64, or a multiple of 64)")
      ->check(CLI::Range(1, 8192));
  app.add_option("--seq", o->seq, "sequence length")->check(CLI::Range(1, 16384));
  app.add_option("--batch", o->batch, "sequences per step")->check(CLI::Range(1, 4096));
  app.add_option("--steps", o->steps, "training steps")->check(CLI::Range(0, 10000000));
  app.add_option("--seed", o->seed, "seed of weights and data");
  app.add_flag("--recompute", o->recompute, "per-layer activation checkpointing");
  app.add_option("--dynamic", o->dynamic,
                 "K > 0: toggle an auxiliary branch every K steps and skip an optimizer step "
                 "periodically; prints 'shift at step N' for each op-sequence change")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--pointer-table", o->pointer_table,
               "once per step, gather the first bytes of every weight through a device-side "
               "table of their addresses (folded into 'checksum')");
  std::string alloc = "tensor";
  app.add_option("--alloc", alloc, "tensor | caching | expandable")
      ->check(CLI::IsMember({"tensor", "caching", "expandable"}));
  // Test-only hook, hidden from --help (empty group): corrupts one weight byte in device memory.
  app.add_option("--corrupt-at-step", o->corrupt_at_step)
      ->group("")
      ->check(CLI::Range(0, 10000000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return {app.exit(e)};
  }
  ParseAllocStyle(alloc, &o->alloc);
  if (const char* error = Validate(o)) {
    std::fprintf(stderr, "chameleon-train-sim: %s\n", error);
    return {2};
  }
  return {};
}

bool AuxBranchOn(const Options& o, int step) {
  return o.dynamic > 0 && (step / o.dynamic) % 2 == 1;
}

bool SkipOptimizerStep(const Options& o, int step) {
  return o.dynamic > 0 && step % o.dynamic == o.dynamic / 2 && (step / o.dynamic) % 3 == 2;
}

}  // namespace chameleon::train_sim
