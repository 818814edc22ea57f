// simgpu's test-only copy fault hook (SIMGPU_FAULT_DROP_COPY, docs/simgpu.md "Fault hook")
// against the swap executor: chameleon-train-sim (real arithmetic) under the shim at a quarter of
// its peak swaps through pinned host memory; dropping 2 MiB of one swap-in, or delaying them past
// their consumer (SIMGPU_FAULT_DELAY_COPY), must change the final checksum in every trial, and
// the same runs without a hook must reproduce the unlimited run's. The hooks count copies as they
// are submitted, so no trial depends on which copy finishes first.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "child_process.h"
#include "test_env.h"

namespace shim_test {
namespace {

const std::vector<std::string> kArgs = {
    CHAMELEON_TRAIN_SIM, "--layers", "4",       "--hidden", "64", "--seq", "256",
    "--batch",           "32",       "--steps", "3"};

std::string Checksum(const CapturedRun& r) {
  for (const std::string& l : r.out)
    if (l.rfind("checksum ", 0) == 0) return l;
  return "";
}

std::uint64_t Peak(const CapturedRun& r) {
  for (const std::string& l : r.out)
    if (l.rfind("peak ", 0) == 0) return std::stoull(l.substr(5));
  return 0;
}

class CopyFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reference_ = RunCapturingStderr(kArgs,
                                    {{"LD_PRELOAD", ""},
                                     {"LD_LIBRARY_PATH", CHAMELEON_SIMGPU_DIR},
                                     {"SIMGPU_MEMORY", std::to_string(8ull << 30)}},
                                    120000);
    ASSERT_EQ(reference_.status, 0) << reference_.err;
    ASSERT_FALSE(Checksum(reference_).empty());
    limit_ = Peak(reference_) / 4;
    ASSERT_GT(limit_, 0u);
  }
  CapturedRun Limited(const std::string& hook, const char* variable = "SIMGPU_FAULT_DROP_COPY") {
    auto env = ShimEnv("/nonexistent/c.sock");  // no daemon: the safety net swaps
    env["SIMGPU_MEMORY"] = std::to_string(limit_ + (16u << 20));
    env["CHAMELEON_DEVICE_LIMIT"] = std::to_string(limit_);
    if (!hook.empty()) env[variable] = hook;
    return RunCapturingStderr(kArgs, env, 120000);
  }
  /// Three runs with `variable`=3:2MiB: each ends normally, with a checksum unlike the reference.
  void ExpectAnotherChecksumInEveryTrial(const char* variable) {
    for (int trial = 0; trial < 3; ++trial) {
      const CapturedRun r = Limited("3:2MiB", variable);
      ASSERT_EQ(r.status, 0) << r.err;
      ASSERT_FALSE(Checksum(r).empty()) << r.err;
      EXPECT_NE(Checksum(r), Checksum(reference_)) << variable << ", trial " << trial;
    }
  }
  CapturedRun reference_;
  std::uint64_t limit_ = 0;
};

TEST_F(CopyFaultTest, ShouldReproduceTheUnlimitedChecksumWithoutTheHook) {
  const CapturedRun r = Limited("");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Checksum(r), Checksum(reference_));
}

TEST_F(CopyFaultTest, ShouldChangeTheChecksumInEveryTrialWhenOneSwapInLosesTwoMiB) {
  // The third host-to-device copy of 2 MiB or more out of pinned host memory: a swap-in piece.
  ExpectAnotherChecksumInEveryTrial("SIMGPU_FAULT_DROP_COPY");
}

TEST_F(CopyFaultTest, ShouldChangeTheChecksumInEveryTrialWhenOneSwapInLandsAfterItsConsumer) {
  // The same swap-in piece; its middle 2 MiB reach the device only when a copy reads them.
  ExpectAnotherChecksumInEveryTrial("SIMGPU_FAULT_DELAY_COPY");
}

}  // namespace
}  // namespace shim_test
