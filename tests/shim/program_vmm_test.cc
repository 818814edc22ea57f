// The program's own VMM under the swap executor (shim/src/program_vmm.h): vmm_prog's scenarios
// under LD_PRELOAD=libchameleon.so with CHAMELEON_DEVICE_LIMIT (no daemon), checked against the
// plain driver where the driver defines the answer.
#include <cuda.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "child_process.h"
#include "stats_file_reader.h"
#include "test_env.h"

namespace shim_test {
namespace {

constexpr std::uint64_t kMiB = 1u << 20;

/// A run, with the totals of the shim's CHAMELEON_STATS_FILE exit record when the environment
/// named one.
struct Result : CapturedRun {
  std::map<std::string, std::uint64_t> stats;
};

Result RunProg(const std::string& scenario, std::map<std::string, std::string> env) {
  Result r{RunCapturingStderr({CHAMELEON_VMM_PROG, scenario}, env, 60000), {}};
  if (const auto it = env.find("CHAMELEON_STATS_FILE"); it != env.end()) {
    r.stats =
        chameleon::shim::testing::ExitTotals(chameleon::shim::testing::ReadStatsFile(it->second));
    ::unlink(it->second.c_str());
  }
  return r;
}

std::map<std::string, std::string> LimitEnv(std::uint64_t limit) {
  auto env = ShimEnv("/nonexistent/vmm.sock");
  env["CHAMELEON_DEVICE_LIMIT"] = std::to_string(limit);
  env["SIMGPU_MEMORY"] = std::to_string(limit + 16 * kMiB);
  static int n = 0;
  env["CHAMELEON_STATS_FILE"] = "/tmp/chameleon_vmm_test_" + std::to_string(::getpid()) + "_" +
                                std::to_string(n++) + ".jsonl";
  return env;
}

/// A counter's total at exit, from the stats file; UINT64_MAX when absent.
std::uint64_t Stat(const Result& r, const std::string& key) {
  const auto it = r.stats.find(key);
  return it == r.stats.end() ? UINT64_MAX : it->second;
}

bool Has(const CapturedRun& r, const std::string& line) {
  for (const std::string& l : r.out) {
    if (l == line) return true;
  }
  return false;
}

TEST(ProgramVmmTest, ATensorSpanningPagesIsFaultedInWhole) {
  // The launch names the first page only; the second was evicted and unmapped. The run rule
  // faults it in before the kernel runs.
  const Result r = RunProg("span", LimitEnv(8 * kMiB));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(Has(r, "span ok")) << r.err;
  EXPECT_GE(Stat(r, "swap_out_bytes"), 4 * kMiB) << r.err;
  EXPECT_GE(Stat(r, "fault_ins"), 1u) << r.err;
}

TEST(ProgramVmmTest, TheFirstPageOnlyRuleWouldCorruptOrFault) {
  // Same program with the unsound rule (test-only switch): the kernel touches the evicted page.
  auto env = LimitEnv(8 * kMiB);
  env["CHAMELEON_TEST_VMM_FIRST_PAGE_ONLY"] = "1";
  const Result r = RunProg("span", env);
  EXPECT_FALSE(Has(r, "span ok")) << "status " << r.status << "\n" << r.err;
  EXPECT_GE(Stat(r, "swap_out_bytes"), 4 * kMiB) << r.err;
}

TEST(ProgramVmmTest, UnmapAndReleaseInBothOrdersKeepTheDriversSemantics) {
  const Result r = RunProg("remap", LimitEnv(6 * kMiB));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(Has(r, "remap ok")) << r.err;
  // The remapped handle was evicted in between: its contents came back from the host.
  EXPECT_GE(Stat(r, "swap_out_bytes"), 4 * kMiB) << r.err;
  EXPECT_GE(Stat(r, "swap_in_bytes"), 4 * kMiB) << r.err;
}

TEST(ProgramVmmTest, ExportableHandlesPassThroughVirtualOnesDoNotExport) {
  const Result r = RunProg("export", LimitEnv(8 * kMiB));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(Has(r, "export shareable 0 fd 1 types " +
                         std::to_string(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)))
      << r.err;
  // A handle created without shareable types cannot be exported (the driver refuses too); its
  // properties are the ones it was created with.
  EXPECT_TRUE(Has(r, "export plain refused location " +
                         std::to_string(CU_MEM_LOCATION_TYPE_DEVICE) + "/0 size-ok"))
      << r.err;
  // The shareable handle behaves exactly as without the shim. (simgpu exports any handle, even
  // one created without shareable types, which CUDA documents as an error: not compared.)
  const Result plain = RunProg("export", PlainEnv());
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_FALSE(plain.out.empty());
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out[0], plain.out[0]);
}

TEST(ProgramVmmTest, MisuseGetsTheDriversErrors) {
  const Result plain = RunProg("errors", PlainEnv());
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_GE(plain.out.size(), 20u);
  const Result r = RunProg("errors", LimitEnv(8 * kMiB));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, plain.out);
  EXPECT_TRUE(Has(r, "map 0"));
  EXPECT_TRUE(Has(r, "map-bogus-handle " + std::to_string(CUDA_ERROR_INVALID_HANDLE)));
  EXPECT_TRUE(Has(r, "release-again " + std::to_string(CUDA_ERROR_INVALID_VALUE)));
}

TEST(ProgramVmmTest, VirtualisationOffPassesThrough) {
  // CHAMELEON_PROGRAM_VMM=off: the pages are the program's own, never swapped. Under the 8 MiB
  // limit the 4 MiB allocation then cannot evict anything and fails cleanly.
  auto env = LimitEnv(8 * kMiB);
  env["CHAMELEON_PROGRAM_VMM"] = "off";
  const Result r = RunProg("span", env);
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(Stat(r, "swap_out_bytes"), 0u) << r.err;
}

}  // namespace
}  // namespace shim_test
