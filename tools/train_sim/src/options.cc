#include "options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "chameleon/ipc/byte_size.h"

namespace chameleon::train_sim {
namespace {

constexpr int kHeadDim = 64;
constexpr int kDefaultModelSeq = 4096;  // --model without --seq: 4096, or a shorter context

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
  if (o->grow_file.empty() != (o->grow_bytes == 0)) {
    return "--grow-file and --grow-bytes go together (and --grow-bytes must be positive)";
  }
  return nullptr;
}

// --model: the shape options replace --hidden/--batch; every value is checked against the
// architecture (heads and KV heads split evenly across --tp GPUs, --seq within the context).
const char* ValidateShape(const CLI::App& app, const std::string& sp, const std::string& flash,
                          Options* o) {
  ShapeSpec& s = o->shape;
  if (!FindArchitecture(o->model, &s.arch)) return "--model: unknown architecture";
  for (const char* option : {"--stop-file", "--grow-file", "--grow-bytes"}) {
    if (app.count(option) > 0)
      return "--stop-file, --grow-file and --grow-bytes do not apply to --model";
  }
  for (const char* option : {"--hidden", "--batch", "--pointer-table"}) {
    if (app.count(option) > 0)
      return "--hidden, --batch and --pointer-table do not apply to --model";
  }
  s.layers = app.count("--layers") > 0 ? o->layers : s.arch.layers;
  if (s.layers > s.arch.layers) return "--layers may not exceed the architecture's layers";
  s.seq = app.count("--seq") > 0 ? o->seq : std::min(s.arch.context, kDefaultModelSeq);
  if (s.seq > s.arch.context) return "--seq exceeds the architecture's context length";
  if (s.arch.heads % s.tp != 0 || s.arch.kv_heads % s.tp != 0) {
    return "--tp must divide the number of attention heads and of KV heads";
  }
  s.sequence_parallel = sp.empty() ? s.tp > 1 : sp == "on";
  if (s.tp > 1 && s.sequence_parallel && s.seq % s.tp != 0) {
    return "--sequence-parallel needs --seq divisible by --tp";
  }
  s.flash_attention = flash == "on";
  if (o->corrupt_at_step >= o->steps && o->corrupt_at_step >= 0) {
    return "--corrupt-at-step must be below --steps with --model";
  }
  o->pipelined = app.count("--pipeline") > 0 || app.count("--micro-batches") > 0;
  if (o->pipelined) {
    if (o->pipeline > s.layers) return "--pipeline may not exceed the layers";
    if (o->pipeline > 1 && s.arch.tied_embedding) {
      return "--pipeline > 1 needs an untied head (the tied embedding of gpt2-xl would live on "
             "two stages)";
    }
    if (o->dynamic > 0 || o->corrupt_at_step >= 0) {
      return "--dynamic and --corrupt-at-step do not apply to --pipeline / --micro-batches";
    }
  }
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
  app.add_option("--model", o->model,
                 "model-shaped mode: gpt2-xl | llama2-7b | llama2-13b | llama3-8b (sampled "
                 "kernels, virtual time from FLOPs and bytes; docs/trainer.md)")
      ->check(CLI::IsMember({"gpt2-xl", "llama2-7b", "llama2-13b", "llama3-8b"}));
  app.add_option("--micro-batch", o->shape.micro_batch, "--model: sequences per step")
      ->check(CLI::Range(1, 1024));
  app.add_option("--tp", o->shape.tp, "--model: tensor-parallel GPUs (this process is one of them)")
      ->check(CLI::Range(1, 64));
  app.add_option("--pipeline", o->pipeline,
                 "--model: pipeline stages, one per device (SIMGPU_DEVICES >= N), 1F1B schedule")
      ->check(CLI::Range(1, 16));
  app.add_option("--micro-batches", o->micro_batches,
                 "--model: micro-batches per step (gradients accumulated in order)")
      ->check(CLI::Range(1, 1024));
  std::string sequence_parallel, flash = "on";
  app.add_option("--sequence-parallel", sequence_parallel,
                 "--model: on | off (default: on when --tp > 1)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--flash-attention", flash, "--model: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--stop-file", o->stop_file,
                 "end the run before the first step at which this file exists (--steps is then "
                 "the most steps)");
  app.add_option("--grow-file", o->grow_file,
                 "once this file exists, allocate --grow-bytes more device memory (checked "
                 "before each step) and keep it to the end");
  std::string grow_bytes;
  app.add_option("--grow-bytes", grow_bytes, "bytes --grow-file takes (16MiB, 1GB, or digits)");
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
    // Help prints and exits 0; every rejected value is a usage error: CLI11's message, exit 2.
    const int code = app.exit(e);
    return {code == 0 ? 0 : 2};
  }
  ParseAllocStyle(alloc, &o->alloc);
  if (!grow_bytes.empty()) {
    const ipc::ByteSize parsed = ipc::ParseByteSize(grow_bytes);
    if (!parsed || parsed.bytes == 0) {
      std::fprintf(
          stderr,
          "chameleon-train-sim: --grow-bytes '%s': expected a positive byte size: %s (%s)\n",
          grow_bytes.c_str(), parsed ? "zero" : parsed.error, ipc::kByteSizeForms);
      return {2};
    }
    o->grow_bytes = parsed.bytes;
  }
  const bool shaped = !o->model.empty();
  if (!shaped) {
    for (const char* option : {"--micro-batch", "--tp", "--sequence-parallel", "--flash-attention",
                               "--pipeline", "--micro-batches"}) {
      if (app.count(option) > 0) {
        std::fprintf(stderr, "chameleon-train-sim: %s needs --model\n", option);
        return {2};
      }
    }
  }
  if (const char* error = shaped ? ValidateShape(app, sequence_parallel, flash, o) : Validate(o)) {
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
