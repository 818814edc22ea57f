// chameleon-bound end to end: arguments in, the documented JSON object and exit status out.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "chameleon/policy/profile.h"
#include "chameleon/policy/profile_json.h"

namespace {

struct CliResult {
  int status = -1;
  std::string out;
};

CliResult Bound(const std::string& args) {
  CliResult run;
  const std::string command = std::string(CHAMELEON_BOUND_PATH) + " " + args + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) run.out += buf;
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(BoundCli, ShouldPrintTheBoundAndItsTermsAsJson) {
  // The hand-computed case of transfer_bound_test.cc: X = A = 30 GB, link 1.2 s, phases 2.4 s.
  const CliResult run = Bound(
      "--peak 40GB --limit 10GB --out-bw 25GB --in-bw 25GB --unlimited-s 1.0 --forward-s 0.4");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["excess_bytes"].get<std::uint64_t>(), 30'000'000'000u);
  EXPECT_DOUBLE_EQ(j["link_s"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(j["bound_s"].get<double>(), 2.4);
  EXPECT_NEAR(j["relative_throughput"].get<double>(), 1.0 / 2.4, 1e-12);
}

TEST(BoundCli, ShouldPrintTheWindowedBoundWhenTheBackwardIsGiven) {
  // transfer_bound_test.cc's GPT-2-XL-like case: T_b = 0.25 s, T_w = 0.34 s.
  const CliResult run = Bound(
      "--peak 32GB --limit 20GB --optimizer-bytes 20GB --out-bw 48GB --in-bw 60GB "
      "--unlimited-s 0.15 --forward-s 0.05 --backward-s 0.09");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_DOUBLE_EQ(j["bound_s"].get<double>(), 0.25);
  EXPECT_NEAR(j["windowed_s"].get<double>(), 0.34, 1e-12);
  EXPECT_NEAR(j["windowed_relative_throughput"].get<double>(), 0.15 / 0.34, 1e-12);
  // Phases longer than the step are rejected.
  EXPECT_EQ(Bound("--peak 32GB --limit 20GB --optimizer-bytes 20GB --out-bw 48GB --in-bw 60GB "
                  "--unlimited-s 0.15 --forward-s 0.05 --backward-s 0.2")
                .status,
            2);
}

TEST(BoundCli, ShouldSayInfeasibleBelowTheLargestOpAndRejectBadInput) {
  const CliResult infeasible = Bound(
      "--peak 10GB --limit 3GB --out-bw 25GB --in-bw 25GB --unlimited-s 0.5 --forward-s 0.2 "
      "--largest-op 3GB --reserve 64MiB");
  ASSERT_EQ(infeasible.status, 0) << infeasible.out;
  const auto j = nlohmann::json::parse(infeasible.out);
  EXPECT_EQ(j["status"], "infeasible");
  EXPECT_FALSE(j.contains("bound_s"));
  EXPECT_EQ(Bound("--peak 10GB --limit 3GB --out-bw 0 --in-bw 25GB --unlimited-s 0.5 "
                  "--forward-s 0.2")
                .status,
            2);
  EXPECT_NE(
      Bound("--peak lots --limit 3GB --out-bw 1 --in-bw 1 --unlimited-s 1 --forward-s 0").status,
      0);
}

// --profile: the working-set bound of working_set_bound_test.cc's first case (scores and a buffer
// at op 0, scores and the probabilities at op 1; 3 x 256 MiB against 729 MB): 256 MiB must leave
// between the ops, 10.737 ms at 25 GB/s, on top of 0.02 s of compute.
TEST(BoundCli, ShouldAddTheWorkingSetBoundOfAProfile) {
  using namespace chameleon::policy;
  Profile p;
  p.iteration_s = 0.02;
  p.ops.resize(2);
  for (int t = 0; t < 3; ++t) {
    ProfileTensor tensor;
    tensor.bytes = 256u << 20;
    p.tensors.push_back(tensor);
  }
  p.ops[0].writes = {0};
  p.ops[0].reads = {1};
  p.ops[1].reads = {0};
  p.ops[1].writes = {2};
  p.tensors[0].uses = {0, 1};
  p.tensors[1].uses = {0};
  p.tensors[2].uses = {1};
  p.tensors[2].alloc_op = 1;
  const std::string path = ::testing::TempDir() + "bound_cli_profile.json";
  std::ofstream(path) << ProfileToJson(p);
  const std::string common =
      "--peak 805306368 --limit 729000000 --out-bw 25GB --in-bw 25GB --unlimited-s 0.02 "
      "--forward-s 0.01 --profile ";
  const CliResult run = Bound(common + path);
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  const auto& ws = j["working_set"];
  EXPECT_TRUE(ws["feasible"].get<bool>());
  EXPECT_EQ(ws["out_bytes"].get<std::uint64_t>(), 256u << 20);
  EXPECT_EQ(ws["boundaries"].get<int>(), 1);
  EXPECT_DOUBLE_EQ(ws["stall_s"].get<double>(), 268435456.0 / 25e9);
  EXPECT_DOUBLE_EQ(ws["pair_stall_s"].get<double>(), 268435456.0 / 25e9);
  EXPECT_FALSE(ws["windowed"].get<bool>());  // the profile has no op times
  // The byte count alone allows unlimited speed (76 MB over a 25 GB/s link); the working sets
  // do not.
  EXPECT_DOUBLE_EQ(j["bound_s"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(j["combined_s"].get<double>(), 0.02 + 268435456.0 / 25e9);
  // A profile that is not there, or not a profile, is a usage error.
  EXPECT_EQ(Bound(common + path + ".missing").status, 2);
  std::ofstream(path) << "{\"ops\": 3}";
  EXPECT_EQ(Bound(common + path).status, 2);
  std::remove(path.c_str());
}

}  // namespace
