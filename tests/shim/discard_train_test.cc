// The executor's discards end to end (docs/shim.md, "Swap executor"; shim/src/swap/discarder.h):
// the model-shaped trainer, whose kernels write sampled words of every 2 MiB granule (so a lost,
// stale or misplaced range changes its checksum), runs under the shim at half its peak with
// the safety net alone. Its checksum must be the unlimited plain run's, and the stats file
// must show that chunks and buffers were discarded (and that it really swapped).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "child_process.h"
#include "stats_file_reader.h"
#include "test_env.h"

namespace shim_test {
namespace {

// The LLM evaluation's GPT-2 XL shape (docs/benchmarks.md): at half its peak the safety net
// moves ~27 GB a step, every tensor through reused chunks and host buffers.
const std::vector<std::string> kArgs = {
    CHAMELEON_TRAIN_SIM, "--model", "gpt2-xl", "--micro-batch", "8", "--seq", "1024",
    "--steps",           "2"};

std::string Line(const CapturedRun& r, const std::string& key) {
  for (const std::string& l : r.out)
    if (l.rfind(key + " ", 0) == 0) return l;
  return "";
}

TEST(DiscardTrainTest, ShouldKeepTheUnlimitedChecksumAtHalfThePeakWhileDiscarding) {
  auto plain = PlainEnv();
  plain["SIMGPU_MACHINE"] = "h200-sxm";
  plain["SIMGPU_MEMORY"] = "4T";
  const CapturedRun reference = RunCapturingStderr(kArgs, plain, 240000);
  ASSERT_EQ(reference.status, 0) << reference.err;
  const std::string checksum = Line(reference, "checksum");
  const std::string peak_line = Line(reference, "peak");
  ASSERT_FALSE(checksum.empty());
  ASSERT_FALSE(peak_line.empty());
  const std::uint64_t limit = std::stoull(peak_line.substr(5)) / 2;
  ASSERT_GT(limit, 0u);

  const std::string stats =
      ::testing::TempDir() + "/discard_train_" + std::to_string(::getpid()) + ".jsonl";
  std::remove(stats.c_str());
  auto env = ShimEnv("/nonexistent/c.sock");  // no daemon: the safety net swaps
  env["SIMGPU_MACHINE"] = "h200-sxm";
  env["SIMGPU_MEMORY"] = std::to_string(limit + (16u << 20));
  env["CHAMELEON_DEVICE_LIMIT"] = std::to_string(limit);
  env["CHAMELEON_SWAP_POLICY"] = "off";
  // ~22 GB swapped out at once: more than half of a small build machine's RAM (the default
  // cap), and sparse memory makes it cheap (the evaluation gives the machine's topology instead).
  env["CHAMELEON_HOST_POOL_BYTES"] = "64GiB";
  env["CHAMELEON_STATS_FILE"] = stats;
  const CapturedRun limited = RunCapturingStderr(kArgs, env, 240000);
  ASSERT_EQ(limited.status, 0) << limited.err;
  EXPECT_EQ(Line(limited, "checksum"), checksum);

  const auto exit =
      chameleon::shim::testing::ExitRecord(chameleon::shim::testing::ReadStatsFile(stats));
  ASSERT_TRUE(exit.has_value());
  EXPECT_GT(exit->totals.at("swap_in_bytes"), 0u);
  EXPECT_GT(exit->totals.at("discarded_bytes"), 0u);
  std::remove(stats.c_str());
}

}  // namespace
}  // namespace shim_test
