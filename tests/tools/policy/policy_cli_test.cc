// chameleon-policy end to end: a profile file in (docs/profile-format.md), the plan the daemon's
// generator makes under the daemon's executor model out, with the documented exit statuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "chameleon/policy/profile_json.h"
#include "chameleon/policy/synthetic.h"
#include "support/child_process.h"

namespace {

class PolicyCli : public ::testing::Test {
 protected:
  /// chameleon-policy with `args` (split on spaces): exit status and stdout.
  chameleon::test_support::ChildResult Policy(const std::string& args) {
    std::vector<std::string> argv{CHAMELEON_POLICY_PATH};
    std::istringstream words(args);
    for (std::string w; words >> w;) argv.push_back(w);
    return chameleon::test_support::RunChild(argv, {}, dir_);
  }
  void SetUp() override {
    dir_ = "/tmp/policy_cli_test." + std::to_string(getpid());
    ASSERT_EQ(std::system(("mkdir -p " + dir_).c_str()), 0);
    chameleon::policy::SyntheticSpec spec;
    spec.layers = 8;
    spec.ops = 400;
    spec.tensors = 300;
    profile_ = chameleon::policy::MakeTransformerProfile(spec);
    for (const auto& op : profile_.ops) peak_ = std::max(peak_, op.bytes_live_after);
    std::ofstream(Path("profile.json")) << chameleon::policy::ProfileToJson(profile_);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
  chameleon::policy::Profile profile_;
  std::uint64_t peak_ = 0;
};

TEST_F(PolicyCli, ShouldPlanAProfileBelowTheLimitAndWriteItsCsv) {
  const std::uint64_t limit = peak_ * 3 / 4;
  const auto run = Policy(Path("profile.json") + " --limit " + std::to_string(limit) +
                          " --json --csv " + Path("plan.csv"));
  ASSERT_EQ(run.status, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["peak_before_bytes"].get<std::uint64_t>(), peak_);
  EXPECT_GT(j["swaps"].get<std::uint64_t>(), 0u);
  EXPECT_LE(j["predicted_peak_bytes"].get<std::uint64_t>(), limit);
  EXPECT_GE(j["predicted_iteration_s"].get<double>(), j["iteration_s"].get<double>());
  // The CSV: its documented header and one line per swap.
  std::ifstream csv(Path("plan.csv"));
  std::string header;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_EQ(header.rfind("tensor,external_id,bytes,out_op", 0), 0u) << header;
  std::size_t lines = 0;
  for (std::string line; std::getline(csv, line);) lines += !line.empty();
  EXPECT_EQ(lines, j["swaps"].get<std::size_t>());
}

TEST_F(PolicyCli, ShouldPrintTheTableByDefault) {
  const auto run = Policy(Path("profile.json") + " --limit " + std::to_string(peak_ * 3 / 4));
  ASSERT_EQ(run.status, 0);
  EXPECT_EQ(run.out.rfind("limit ", 0), 0u) << run.out;  // the summary line leads the table
}

TEST_F(PolicyCli, ShouldExitOneWhenNoPlanFits) {
  const auto run = Policy(Path("profile.json") + " --limit 1MiB --json");
  EXPECT_EQ(run.status, 1);
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["status"], "infeasible");
  EXPECT_GT(j["bytes_missing"].get<std::uint64_t>(), 0u);
}

TEST_F(PolicyCli, ShouldRejectMissingOrMalformedInputWithStatusTwo) {
  EXPECT_EQ(Policy(Path("absent.json") + " --limit 1GiB").status, 2);
  std::ofstream(Path("bad.json")) << "{\"format\": \"chameleon-profile\", \"ops\": [";
  EXPECT_EQ(Policy(Path("bad.json") + " --limit 1GiB").status, 2);
  EXPECT_NE(Policy(Path("profile.json") + " --limit lots").status, 0);
  EXPECT_EQ(Policy(Path("profile.json") + " --limit 1GiB --candidate 99").status, 2);
}

}  // namespace
