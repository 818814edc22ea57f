// chameleon-bound end to end: arguments in, the documented JSON object and exit status out.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace
