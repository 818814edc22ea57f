// chameleon-policy: plans one detailed profile (docs/profile-format.md, e.g. written by
// `chameleonctl dump-profile` or `chameleon-replay --emit-profile`) with the generator the daemon
// runs, under the daemon's executor model (chunks, reserve, transfers accounted when issued), and
// explains the plan: a table on stdout (or a JSON summary), optionally the CSV and the memory
// timeline. An operator's answer to "what would the daemon swap, and why is it slow", without a
// daemon or a GPU. docs/policy.md "Explanations".
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "chameleon/cli/byte_size_option.h"
#include "chameleon/cli/guarded_main.h"
#include "chameleon/daemon/swap_chunk.h"
#include "chameleon/policy/device_profile.h"
#include "chameleon/policy/explain.h"
#include "chameleon/policy/generator.h"
#include "chameleon/policy/options.h"
#include "chameleon/policy/policy_files.h"
#include "chameleon/policy/profile_json.h"

namespace {

namespace policy = chameleon::policy;

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return !in.bad();
}

nlohmann::json Summary(const policy::GenerateResult& r) {
  nlohmann::json j{{"status", policy::ToString(r.status)}, {"message", r.message}};
  const policy::Plan& p = r.plan;
  j["peak_before_bytes"] = p.peak_before_bytes;
  if (!r.ok()) {
    j["bytes_missing"] = r.infeasibility.bytes_missing;
    j["at_op"] = r.infeasibility.at_op;
    return j;
  }
  std::uint64_t out_bytes = 0;
  for (const policy::PlannedSwap& s : p.swaps) out_bytes += s.bytes;
  j["swaps"] = p.swaps.size();
  j["swapped_bytes"] = out_bytes;
  j["predicted_peak_bytes"] = p.predicted_peak_bytes;
  j["iteration_s"] = p.iteration_s;
  j["predicted_in_wait_s"] = p.predicted_in_wait_s;
  j["predicted_out_wait_s"] = p.predicted_out_wait_s;
  j["predicted_stall_s"] = p.predicted_stall_s;
  j["predicted_iteration_s"] = p.predicted_iteration_s;
  j["simulated_stall_s"] = p.simulated_stall_s;
  return j;
}

int Run(int argc, char** argv) {
  CLI::App app{"chameleon-policy: the swap plan the daemon would generate for one profile"};
  std::string profile_path, csv_path, timeline_path;
  policy::GeneratorOptions options;
  std::uint64_t out_bw = 0, in_bw = 0;
  std::uint32_t candidate = 0;
  std::uint16_t device = 0;
  bool as_json = false;
  app.add_option("profile", profile_path, "detailed profile (JSON, docs/profile-format.md)")
      ->required();
  chameleon::cli::AddByteSizeOption(app, "--limit", &options.device_limit_bytes, "the device limit")
      ->required();
  chameleon::cli::AddByteSizeOption(app, "--out-bw", &out_bw,
                                    "device-to-host bandwidth, bytes per second (default 25GB)");
  chameleon::cli::AddByteSizeOption(app, "--in-bw", &in_bw,
                                    "host-to-device bandwidth, bytes per second (default 25GB)");
  chameleon::cli::AddByteSizeOption(
      app, "--reserve", &options.reserve_bytes,
      "bytes kept free below the limit (default: the daemon's, docs/policy.md \"Reserve\")");
  app.add_option("--candidate", candidate,
                 "the GEN_POLICY candidate's configuration (0 = the base; C and margin vary)");
  app.add_option("--device", device,
                 "plan this device's tensors of a multi-device profile (the executor's; default "
                 "0): the others take no room and are not swapped, as in the daemon");
  app.add_option("--csv", csv_path, "also write the plan as CSV to this file");
  app.add_option("--timeline", timeline_path,
                 "also write the memory timeline (.svg, otherwise a gnuplot script)");
  app.add_flag("--json", as_json, "print a JSON summary instead of the table");
  CLI11_PARSE(app, argc, argv);

  std::string text;
  if (!ReadFile(profile_path, &text)) {
    std::fprintf(stderr, "chameleon-policy: cannot read %s\n", profile_path.c_str());
    return 2;
  }
  policy::Profile profile;
  try {
    profile = policy::ProfileFromJson(text);
  } catch (const policy::ProfileFormatError& e) {
    std::fprintf(stderr, "chameleon-policy: %s: %s\n", profile_path.c_str(), e.what());
    return 2;
  }
  // A process driving several devices is planned for the one its executor serves.
  profile = policy::ProjectToDevice(profile, device).profile;
  // The daemon's model of its shim (session_policy.cc TakeGeneration).
  options.device_to_host_bytes_per_s = static_cast<double>(out_bw);
  options.host_to_device_bytes_per_s = static_cast<double>(in_bw);
  options.chunk_bytes = chameleon::daemon::kShimChunkBytes;
  if (app.count("--reserve") == 0) {
    options.reserve_bytes =
        chameleon::daemon::DefaultReserveBytes(options.device_limit_bytes, options.chunk_bytes);
  }
  options.release_at_issue = true;
  const std::vector<policy::GeneratorOptions> configs =
      policy::CandidateConfigs(options, candidate + 1);
  if (candidate >= configs.size()) {
    std::fprintf(stderr, "chameleon-policy: --candidate %u: only %zu configurations\n", candidate,
                 configs.size());
    return 2;
  }
  const policy::GenerateResult result = policy::GeneratePlan(profile, configs[candidate]);
  if (as_json) {
    std::cout << Summary(result).dump() << "\n";
  } else if (result.ok()) {
    policy::WritePlanTable(result.plan, profile, std::cout);
  } else {
    std::printf("%s: %s\n", policy::ToString(result.status), result.message.c_str());
  }
  std::string error;
  if (result.ok() && !csv_path.empty() &&
      !policy::WritePlanCsvFile(result.plan, profile, csv_path, &error)) {
    std::fprintf(stderr, "chameleon-policy: %s\n", error.c_str());
    return 2;
  }
  if (!timeline_path.empty() && !result.plan.memory_before.empty() &&
      !policy::WriteMemoryTimelineFile(result.plan, timeline_path, &error)) {
    std::fprintf(stderr, "chameleon-policy: %s\n", error.c_str());
    return 2;
  }
  switch (result.status) {
    case policy::GenerateStatus::kOk:
      return 0;
    case policy::GenerateStatus::kInfeasible:
      return 1;
    default:
      return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return chameleon::cli::GuardedMain("chameleon-policy", [&] { return Run(argc, argv); });
}
