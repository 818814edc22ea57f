// Pointer tables end to end: chameleon-train-sim --pointer-table (one gather per step through a
// device-side table of every weight's address, folded into `checksum`) under the shim with
// CHAMELEON_DEVICE_LIMIT at a third of its peak, no daemon. The shim's scan before the first
// eviction pins the weights the table reaches: losses, peak and checksum match the unlimited
// run. With the scan switched off (CHAMELEON_POINTER_SCAN=off) the same run evicts weights the
// gather then reads through the table — it fails or its checksum differs, which is what shows
// that the identical result depends on the scan.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "child_process.h"
#include "test_env.h"

namespace shim_test {
namespace {

// Weights of 3-4 MiB (hidden 512) are executor allocations; activations dominate the peak, so the
// pinned weights leave room under a third of it. A step takes about a second of CPU.
const std::vector<std::string> kArgs = {CHAMELEON_TRAIN_SIM,
                                        "--layers",
                                        "2",
                                        "--hidden",
                                        "512",
                                        "--seq",
                                        "256",
                                        "--batch",
                                        "16",
                                        "--steps",
                                        "2",
                                        "--pointer-table"};

using Result = shim_test::CapturedRun;

Result RunCaptured(const std::map<std::string, std::string>& env) {
  return shim_test::RunCapturingStderr(kArgs, env, 120000);
}

std::uint64_t PeakOf(const Result& r) {
  for (const std::string& l : r.out)
    if (l.rfind("peak ", 0) == 0) return std::stoull(l.substr(5));
  return 0;
}

std::map<std::string, std::string> LimitEnv(std::uint64_t limit, bool scan) {
  auto env = ShimEnv("/nonexistent/chameleon.sock");  // no daemon: the limit alone
  env["SIMGPU_MEMORY"] = std::to_string(limit + (16u << 20));
  env["CHAMELEON_DEVICE_LIMIT"] = std::to_string(limit);
  env["CHAMELEON_DEBUG"] = "stats";
  env["CHAMELEON_LOG_LEVEL"] = "debug";
  env["CHAMELEON_POINTER_SCAN"] = scan ? "on" : "off";
  return env;
}

TEST(PointerTableTrainTest, ScannedTablesKeepResultsIdenticalAndWithoutTheScanTheyDiffer) {
  const Result reference = RunCaptured(
      {{"LD_PRELOAD", ""}, {"LD_LIBRARY_PATH", CHAMELEON_SIMGPU_DIR}, {"SIMGPU_MEMORY", "8GiB"}});
  ASSERT_EQ(reference.status, 0) << reference.err;
  const std::uint64_t limit = PeakOf(reference) / 3;
  ASSERT_GT(limit, 0u);

  const Result scanned = RunCaptured(LimitEnv(limit, true));
  ASSERT_EQ(scanned.status, 0) << scanned.err;
  EXPECT_EQ(shim_test::TrainerResults(scanned.out), shim_test::TrainerResults(reference.out));
  EXPECT_NE(scanned.err.find("pointer-table scan 1:"), std::string::npos) << scanned.err;
  // Scans before the table exists find nothing; a later one pins the weights it names.
  EXPECT_TRUE(std::regex_search(scanned.err, std::regex(" [1-9][0-9]* targets pinned")))
      << scanned.err;
  EXPECT_EQ(scanned.err.find("evictions=0 "), std::string::npos) << scanned.err;  // pressure

  const Result off = RunCaptured(LimitEnv(limit, false));
  EXPECT_EQ(off.err.find("pointer-table scan"), std::string::npos);
  EXPECT_TRUE(off.status != 0 ||
              shim_test::TrainerResults(off.out) != shim_test::TrainerResults(reference.out))
      << "without the scan the run should have read an evicted weight through the table";
}

}  // namespace
}  // namespace shim_test
