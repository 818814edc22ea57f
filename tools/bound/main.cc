// chameleon-bound: prints the transfer bound (policy::ComputeTransferBound) of one workload at
// one limit as a JSON object, so that scripts/evaluate uses the same tested function as the
// C++ code. Sizes take the byte-size grammar (ipc/byte_size.h), bandwidths are bytes per second
// (the same grammar: "25GB" means 25e9 B/s), times seconds. docs/policy.md "Transfer bound";
// the `pipeline` subcommand: docs/trainer.md "Transfer bound of a pipeline".
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "chameleon/cli/byte_size_option.h"
#include "chameleon/cli/guarded_main.h"
#include "chameleon/ipc/byte_size.h"
#include "chameleon/policy/device_profile.h"
#include "chameleon/policy/memory.h"
#include "chameleon/policy/profile_json.h"
#include "chameleon/policy/transfer_bound.h"
#include "chameleon/policy/working_set_bound.h"

namespace {

std::uint64_t SizeOrThrow(const std::string& key, const std::string& text) {
  const chameleon::ipc::ByteSize size = chameleon::ipc::ParseByteSize(text);
  if (!size) throw CLI::ValidationError("--stage", key + ": expected a byte size: " + size.error);
  return size.bytes;
}

double SecondsOrThrow(const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    throw CLI::ValidationError("--stage", key + ": expected seconds, got '" + text + "'");
  }
  return v;
}

/// One --stage: comma-separated key=value pairs (peak, compute, out-bw, in-bw, peer,
/// peer-out-bw, peer-in-bw, largest-op).
chameleon::policy::StageBoundInput ParseStage(const std::string& text) {
  chameleon::policy::StageBoundInput s;
  bool peak = false, compute = false, out = false, in = false;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw CLI::ValidationError("--stage", "expected key=value: " + item);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "peak") {
      s.peak_bytes = SizeOrThrow(key, value), peak = true;
    } else if (key == "compute") {
      s.compute_s = SecondsOrThrow(key, value), compute = true;
    } else if (key == "out-bw") {
      s.out_bytes_per_s = double(SizeOrThrow(key, value)), out = true;
    } else if (key == "in-bw") {
      s.in_bytes_per_s = double(SizeOrThrow(key, value)), in = true;
    } else if (key == "peer") {
      s.peer_bytes = SizeOrThrow(key, value);
    } else if (key == "peer-out-bw") {
      s.peer_out_bytes_per_s = double(SizeOrThrow(key, value));
    } else if (key == "peer-in-bw") {
      s.peer_in_bytes_per_s = double(SizeOrThrow(key, value));
    } else if (key == "largest-op") {
      s.largest_op_bytes = SizeOrThrow(key, value);
    } else {
      throw CLI::ValidationError("--stage", "unknown key '" + key + "'");
    }
  }
  if (!(peak && compute && out && in)) {
    throw CLI::ValidationError("--stage", "needs peak=, compute=, out-bw= and in-bw=");
  }
  return s;
}

/// The working-set bound of the profile at `path` (device 0 of a multi-device one) as JSON, or
/// an error message in `*error`.
nlohmann::json WorkingSet(const std::string& path, std::uint64_t limit, double out_bw, double in_bw,
                          std::string* error) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    *error = "cannot read " + path;
    return {};
  }
  chameleon::policy::Profile profile;
  try {
    profile = chameleon::policy::ProfileFromJson(text.str());
  } catch (const chameleon::policy::ProfileFormatError& e) {
    *error = path + ": " + e.what();
    return {};
  }
  if (const std::string bad = chameleon::policy::ValidateProfile(profile); !bad.empty()) {
    *error = path + ": " + bad;
    return {};
  }
  profile = chameleon::policy::ProjectToDevice(profile, 0).profile;
  const chameleon::policy::WorkingSetBound w =
      chameleon::policy::ComputeWorkingSetBound(profile, limit, out_bw, in_bw);
  return {{"feasible", w.feasible},
          {"compute_s", w.compute_s},
          {"stall_s", w.stall_s},
          {"bound_s", w.bound_s},
          {"pair_stall_s", w.pair_stall_s},
          {"windowed", w.windowed},
          {"tensor_windows", w.tensor_windows},
          {"out_bytes", w.out_bytes},
          {"boundaries", w.boundaries},
          {"worst_op", w.worst_op},
          {"worst_bytes", w.worst_bytes}};
}

int PrintPipeline(const chameleon::policy::PipelineBoundInput& in) {
  using chameleon::policy::TransferBoundStatus;
  const chameleon::policy::PipelineTransferBound b = chameleon::policy::ComputeTransferBound(in);
  nlohmann::json j{{"status", chameleon::policy::ToString(b.status)}};
  nlohmann::json stages = nlohmann::json::array();
  for (const chameleon::policy::StageBound& s : b.stages) {
    stages.push_back({{"excess_bytes", s.excess_bytes},
                      {"host_bytes", s.host_bytes},
                      {"peer_bytes", s.peer_bytes},
                      {"link_s", s.link_s},
                      {"bound_s", s.bound_s},
                      {"infeasible", s.infeasible}});
  }
  j["stages"] = stages;
  if (b.status == TransferBoundStatus::kOk) {
    j["bound_s"] = b.bound_s;
    j["slowest_stage"] = b.slowest_stage;
    j["relative_throughput"] = b.relative_throughput;
  }
  std::cout << j.dump() << "\n";
  if (b.status == TransferBoundStatus::kInvalid) {
    std::fprintf(stderr,
                 "chameleon-bound: inputs out of range (at least one stage; bandwidths > 0, peer "
                 "bandwidths with peer=; 0 <= compute <= unlimited-s)\n");
    return 2;
  }
  return 0;
}

int Run(int argc, char** argv) {
  CLI::App app{"chameleon-bound: the transfer bound T_b of one workload at one device limit"};
  chameleon::policy::TransferBoundInput in;
  std::uint64_t out_bw = 0, in_bw = 0;
  // The single-device bound's options are required unless the `pipeline` subcommand runs.
  std::vector<CLI::Option*> required;
  required.push_back(chameleon::cli::AddByteSizeOption(app, "--peak", &in.peak_bytes,
                                                       "the unlimited step's peak device memory"));
  chameleon::cli::AddByteSizeOption(app, "--limit", &in.limit_bytes,
                                    "the device limit (also for `pipeline`)");
  chameleon::cli::AddByteSizeOption(app, "--optimizer-bytes", &in.optimizer_state_bytes,
                                    "optimizer-state bytes P (0 for traces)");
  required.push_back(chameleon::cli::AddByteSizeOption(
      app, "--out-bw", &out_bw, "device-to-host bandwidth, bytes per second"));
  required.push_back(chameleon::cli::AddByteSizeOption(
      app, "--in-bw", &in_bw, "host-to-device bandwidth, bytes per second"));
  app.add_option("--unlimited-s", in.unlimited_s,
                 "the unlimited step (pipeline: iteration) time, seconds");
  required.push_back(
      app.add_option("--forward-s", in.forward_s, "the unlimited step's time up to its peak"));
  app.add_option("--backward-s", in.backward_s,
                 "the unlimited step's backward phase (enables the windowed bound windowed_s)");
  chameleon::cli::AddByteSizeOption(app, "--largest-op", &in.largest_op_bytes,
                                    "the largest working set of a single op");
  chameleon::cli::AddByteSizeOption(app, "--reserve", &in.reserve_bytes,
                                    "the executor's reserve on the device");
  std::string profile_path;
  app.add_option("--profile", profile_path,
                 "a detailed profile of the step (docs/profile-format.md): adds its working-set "
                 "bound (docs/policy.md \"Working-set bound\")");
  CLI::App* pipeline =
      app.add_subcommand("pipeline",
                         "the bound of a 1F1B pipeline, one stage per device "
                         "(--limit, --unlimited-s and --reserve apply per device)");
  std::vector<std::string> stage_texts;
  pipeline
      ->add_option("--stage", stage_texts,
                   "one per stage, in order: peak=B,compute=S,out-bw=B/s,in-bw=B/s[,peer=B,"
                   "peer-out-bw=B/s,peer-in-bw=B/s][,largest-op=B]")
      ->required();
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (pipeline->parsed()) {
    chameleon::policy::PipelineBoundInput pin;
    try {
      for (const std::string& text : stage_texts) pin.stages.push_back(ParseStage(text));
    } catch (const CLI::Error& e) {
      std::fprintf(stderr, "chameleon-bound pipeline: %s\n", e.what());
      return 2;
    }
    if (app.count("--limit") == 0 || app.count("--unlimited-s") == 0) {
      std::fprintf(stderr, "chameleon-bound pipeline: --limit and --unlimited-s are required\n");
      return 2;
    }
    pin.limit_bytes = in.limit_bytes;
    pin.reserve_bytes = in.reserve_bytes;
    pin.unlimited_s = in.unlimited_s;
    return PrintPipeline(pin);
  }
  for (const CLI::Option* o : required) {
    if (o->count() == 0) {
      std::fprintf(stderr, "chameleon-bound: %s is required\n", o->get_name().c_str());
      return 2;
    }
  }
  if (app.count("--limit") == 0 || app.count("--unlimited-s") == 0) {
    std::fprintf(stderr, "chameleon-bound: --limit and --unlimited-s are required\n");
    return 2;
  }
  in.out_bytes_per_s = double(out_bw);
  in.in_bytes_per_s = double(in_bw);

  const chameleon::policy::TransferBound b = chameleon::policy::ComputeTransferBound(in);
  nlohmann::json j{{"status", chameleon::policy::ToString(b.status)},
                   {"excess_bytes", b.excess_bytes},
                   {"across_bytes", b.across_bytes}};
  if (b.status == chameleon::policy::TransferBoundStatus::kOk) {
    j["bound_s"] = b.bound_s;
    j["link_s"] = b.link_s;
    j["phases_s"] = b.phases_s;
    j["relative_throughput"] = b.relative_throughput;
    j["windowed_s"] = b.windowed_s;
    j["windowed_relative_throughput"] = b.windowed_relative_throughput;
  }
  if (!profile_path.empty()) {
    std::string error;
    const nlohmann::json w =
        WorkingSet(profile_path, in.limit_bytes, in.out_bytes_per_s, in.in_bytes_per_s, &error);
    if (!error.empty()) {
      std::fprintf(stderr, "chameleon-bound: %s\n", error.c_str());
      return 2;
    }
    j["working_set"] = w;
    if (b.status == chameleon::policy::TransferBoundStatus::kOk && w["feasible"].get<bool>()) {
      // Both bounds hold: the step is at least as long as the longer of them.
      const double combined = std::max(b.windowed_s, w["bound_s"].get<double>());
      j["combined_s"] = combined;
      j["combined_relative_throughput"] = in.unlimited_s / combined;
    }
  }
  std::cout << j.dump() << "\n";
  if (b.status == chameleon::policy::TransferBoundStatus::kInvalid) {
    std::fprintf(stderr,
                 "chameleon-bound: inputs out of range (bandwidths must be > 0, "
                 "0 <= forward-s <= unlimited-s, forward-s + backward-s <= unlimited-s)\n");
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return chameleon::cli::GuardedMain("chameleon-bound", [&] { return Run(argc, argv); });
}
