#include "options.h"

#include <CLI/CLI.hpp>
#include <cstdio>

namespace chameleon::replay {
namespace {

// "K:P" with K >= 1 and 0 < P <= 1.
bool ParsePerturb(const std::string& text, ReplayOptions* out) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return false;
  try {
    std::size_t used = 0;
    const int k = std::stoi(text.substr(0, colon), &used);
    if (used != colon) return false;
    const std::string p_text = text.substr(colon + 1);
    const double p = std::stod(p_text, &used);
    if (used != p_text.size() || k < 1 || !(p > 0 && p <= 1)) return false;
    out->perturb_every = k;
    out->perturb_fraction = p;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int ParseOptions(int argc, char** argv, ReplayOptions* out) {
  CLI::App app{"Replays a PyTorch execution trace as a workload on the CUDA driver (simgpu)."};
  std::string perturb, alloc = "tensor";
  app.add_option("trace", out->trace, "execution trace (.json or .json.gz)")->required();
  app.add_option("--kineto", out->kineto,
                 "matching Kineto trace: use its recorded kernel durations");
  app.add_option("--iterations", out->iterations, "iterations to replay")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--perturb", perturb, "K:P - every K iterations perturb a fraction P of the ops");
  app.add_option("--emit-profile", out->emit_profile,
                 "write the detailed profile of iteration 0 (JSON)");
  app.add_option("--alloc", alloc, "tensor (cuMemAllocAsync per storage) or caching (segments)")
      ->check(CLI::IsMember({"tensor", "caching"}));
  app.add_option("--sample-stride", out->sample_stride, "bytes between the words a kernel samples")
      ->check(CLI::Range(8u, 1u << 30));
  app.add_option("--corrupt-at-iteration", out->corrupt_at_iteration,
                 "test only: flip one byte of one input tensor before iteration N");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? -1 : 2;
  }
  if (out->sample_stride % 8 != 0) {
    std::fprintf(stderr, "chameleon-replay: --sample-stride must be a multiple of 8\n");
    return 2;
  }
  if (!perturb.empty() && !ParsePerturb(perturb, out)) {
    std::fprintf(stderr,
                 "chameleon-replay: --perturb expects K:P with K >= 1 and 0 < P <= 1, got '%s'\n",
                 perturb.c_str());
    return 2;
  }
  out->alloc = alloc == "caching" ? AllocStyle::kCaching : AllocStyle::kTensor;
  return 0;
}

}  // namespace chameleon::replay
