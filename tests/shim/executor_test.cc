// The swap executor end to end: chameleon-train-sim on simgpu with device memory at a quarter of
// its peak. Without the shim it stops with its out-of-memory error; under the shim with
// CHAMELEON_DEVICE_LIMIT it finishes with the unlimited run's losses, peak and checksum while
// simgpu's physical high-water mark stays under the limit, and with a daemon the policy takes
// over from the safety net. cuMemGetInfo reports the limit.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "stats_file_reader.h"
#include "support/wait_for.h"
#include "test_env.h"

namespace shim_test {
namespace {

// Every activation of this shape is 2 MiB or more ([rows, 64] floats with rows = 32 * 256), and
// no single op needs more than about a third of a quarter of the peak (4 layers): 1/4 is
// feasible. A step takes a fraction of a second of CPU.
const std::vector<std::string> kShape = {"--layers", "4",   "--hidden", "64",
                                         "--seq",    "256", "--batch",  "32"};

/// A run, with what the shim wrote to its CHAMELEON_STATS_FILE when the environment named one.
struct Result : shim_test::CapturedRun {
  std::map<std::string, std::uint64_t> stats;  ///< the exit record's totals and "limit"
};

/// `records`, when given, receives every record of the stats file.
Result RunCaptured(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& env,
                   std::vector<chameleon::shim::testing::StatsRecord>* records = nullptr) {
  Result r{shim_test::RunCapturingStderr(argv, env, 120000), {}};
  if (const auto it = env.find("CHAMELEON_STATS_FILE"); it != env.end()) {
    const auto all = chameleon::shim::testing::ReadStatsFile(it->second);
    r.stats = chameleon::shim::testing::ExitTotals(all);
    if (records != nullptr) *records = all;
    ::unlink(it->second.c_str());  // the environment may be reused for another run
  }
  return r;
}

/// A stats file path unique to this test process and call.
std::string StatsPath() {
  static int n = 0;
  return "/tmp/chameleon_executor_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++) +
         ".jsonl";
}

std::vector<std::string> TrainerArgs(const std::string& style, int steps) {
  std::vector<std::string> argv = {CHAMELEON_TRAIN_SIM};
  argv.insert(argv.end(), kShape.begin(), kShape.end());
  for (const std::string& a :
       {std::string("--steps"), std::to_string(steps), std::string("--alloc"), style}) {
    argv.push_back(a);
  }
  return argv;
}

std::uint64_t Field(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return UINT64_MAX;
  return std::stoull(text.substr(at + key.size()));
}

/// A counter's total (or "limit") at exit, from the stats file; UINT64_MAX when absent.
std::uint64_t Stat(const Result& r, const std::string& key) {
  const auto it = r.stats.find(key);
  return it == r.stats.end() ? UINT64_MAX : it->second;
}

std::uint64_t PeakOf(const Result& r) {
  for (const std::string& l : r.out) {
    if (l.rfind("peak ", 0) == 0) return std::stoull(l.substr(5));
  }
  return 0;
}

std::map<std::string, std::string> SimEnv(std::uint64_t capacity) {
  return {{"LD_PRELOAD", ""},
          {"LD_LIBRARY_PATH", CHAMELEON_SIMGPU_DIR},
          {"SIMGPU_MEMORY", std::to_string(capacity)}};
}

/// Under the shim with the limit, no daemon. simgpu gets 16 MiB more than the limit, so that
/// its high-water mark staying under the limit shows the shim's enforcement, not simgpu's.
std::map<std::string, std::string> LimitEnv(std::uint64_t limit, const std::string& socket) {
  auto env = ShimEnv(socket);
  env["SIMGPU_MEMORY"] = std::to_string(limit + (16u << 20));
  env["CHAMELEON_DEVICE_LIMIT"] = std::to_string(limit);
  env["CHAMELEON_STATS_FILE"] = StatsPath();
  return env;
}

class ExecutorTrainerTest : public ::testing::TestWithParam<const char*> {
 protected:
  /// The unlimited run (the reference) and a quarter of its peak.
  void SetUp() override {
    reference_ = RunCaptured(TrainerArgs(GetParam(), 3), SimEnv(8ull << 30));
    ASSERT_EQ(reference_.status, 0) << reference_.err;
    quarter_ = PeakOf(reference_) / 4;
    ASSERT_GT(quarter_, 0u);
  }
  Result reference_;
  std::uint64_t quarter_ = 0;
};

TEST_P(ExecutorTrainerTest, WithoutTheShimTheTrainerRunsOutOfMemory) {
  const Result plain = RunCaptured(TrainerArgs(GetParam(), 3), SimEnv(quarter_ + (16u << 20)));
  EXPECT_EQ(plain.status, 3);
  EXPECT_NE(plain.err.find("out of memory"), std::string::npos) << plain.err;
}

TEST_P(ExecutorTrainerTest, UnderTheLimitResultsAreIdentical) {
  auto env = LimitEnv(quarter_, "/nonexistent/c.sock");
  if (std::string(GetParam()) == "expandable") {
    // The program's own pages are virtualised and swapped (docs/shim.md, "Program VMM"). Its
    // allocator sizes each VA reservation by the device's memory (as PyTorch does), so on a
    // device of the limit's size it stops at its own reservation, whatever the executor does;
    // on a device of the peak's size, with the same limit, it trains.
    const Result small = RunCaptured(TrainerArgs(GetParam(), 3), env);
    EXPECT_EQ(small.status, 3) << small.err;
    EXPECT_NE(small.err.find("reservation exhausted"), std::string::npos) << small.err;
    env["SIMGPU_MEMORY"] = std::to_string(PeakOf(reference_) + (16u << 20));
  }
  const Result r = RunCaptured(TrainerArgs(GetParam(), 3), env);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(shim_test::TrainerResults(r.out), shim_test::TrainerResults(reference_.out));
  const std::uint64_t high = Field(r.err, "high-water ");
  ASSERT_NE(high, UINT64_MAX) << r.err;
  EXPECT_LE(high, quarter_);
  EXPECT_EQ(Stat(r, "limit"), quarter_) << r.err;
  EXPECT_GT(Stat(r, "swap_out_bytes"), 0u);
  EXPECT_NE(Stat(r, "swap_out_bytes"), UINT64_MAX);
  EXPECT_EQ(Stat(r, "policy_generation"), 0u);  // no daemon: the safety net did it all
}

/// Sum of the trainer's per-step virtual times ("step N loss L time T").
double StepSeconds(const Result& r) {
  double total = 0;
  for (const std::string& l : r.out) {
    const auto at = l.find(" time ");
    if (l.rfind("step ", 0) == 0 && at != std::string::npos) total += std::stod(l.substr(at + 6));
  }
  return total;
}

// The waits the executor measures on simgpu's clocks (for swap-ins, fault-ins, chunks) are what
// the daemon takes out of an interval's time to find its compute (docs/detection.md): they must
// be most of what the safety net adds to the steps, and never more.
TEST_P(ExecutorTrainerTest, TheMeasuredWaitsAreMostOfWhatTheSafetyNetAddsAndNoMore) {
  auto env = LimitEnv(quarter_, "/nonexistent/c.sock");
  if (std::string(GetParam()) == "expandable") {  // as in UnderTheLimitResultsAreIdentical
    env["SIMGPU_MEMORY"] = std::to_string(PeakOf(reference_) + (16u << 20));
  }
  const Result r = RunCaptured(TrainerArgs(GetParam(), 3), env);
  ASSERT_EQ(r.status, 0) << r.err;
  const double added_s = StepSeconds(r) - StepSeconds(reference_);
  ASSERT_GT(added_s, 0) << "the limit cost nothing: no waits to compare";
  const double waits_s = 1e-9 * double(Stat(r, "swap_in_wait_ns") + Stat(r, "fault_in_wait_ns") +
                                       Stat(r, "alloc_wait_ns"));
  RecordProperty("added_s", std::to_string(added_s));
  RecordProperty("waits_s", std::to_string(waits_s));
  EXPECT_LE(waits_s, added_s + 1e-6);
  // Tensors and caching segments: ~92 % (the rest: host waits of unmaps and drains). The
  // program's own VMM pages (expandable) also spend time mapped to host memory, which no
  // counter measures: 61 %.
  if (std::string(GetParam()) != "expandable") {
    EXPECT_GE(waits_s, 0.75 * added_s);
  }
}

TEST(ExecutorOomTest, OpsThatCannotFitTheLimitFailCleanly) {
  // 8 MiB cannot hold the tensors of one attention op of this shape: the executor evicts all it
  // can, then the driver call that needs more returns CUDA_ERROR_OUT_OF_MEMORY, which the trainer
  // reports as its out-of-memory error. No crash, no hang.
  const Result r = RunCaptured(TrainerArgs("tensor", 1), LimitEnv(8u << 20, "/nonexistent/c.sock"));
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("out of memory"), std::string::npos) << r.err;
  EXPECT_EQ(Stat(r, "limit"), 8u << 20) << r.err;
}

INSTANTIATE_TEST_SUITE_P(AllocationStyles, ExecutorTrainerTest,
                         ::testing::Values("tensor", "caching", "expandable"));

#ifdef CHAMELEON_DAEMON
/// CHAMELEON_STATS_FILE (docs/shim.md, "Stats file"): one record per iteration the executor
/// closed, then one at exit; the records' per-span counters add up to the exit totals, and the
/// generation in force is what the policy run applied, so steady state reads apart from warm-up.
void ExpectOneRecordPerIterationSummingToTheTotals(
    const std::vector<chameleon::shim::testing::StatsRecord>& records, std::uint64_t limit) {
  ASSERT_GE(records.size(), 2u);
  EXPECT_EQ(records.back().event, "exit");
  std::map<std::string, std::uint64_t> sum;
  std::uint64_t last_generation = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& rec = records[i];
    if (i + 1 < records.size()) {
      EXPECT_EQ(rec.event, "iteration") << i;
      EXPECT_EQ(rec.iteration, i + 1);  // one record per boundary, none missed
    }
    EXPECT_EQ(rec.pid, records[0].pid);
    EXPECT_EQ(rec.limit, limit);
    EXPECT_GE(rec.generation_in_force, last_generation) << i;  // generations only move on
    last_generation = rec.generation_in_force;
    for (const auto& [name, v] : rec.counters) sum[name] += v;
  }
  EXPECT_EQ(records.front().generation_in_force, 0u);  // warm-up: no policy before the first
  EXPECT_GT(last_generation, 0u);                      // steady state: the daemon's
  for (const char* name : {"swap_out_bytes", "swap_in_bytes", "fault_ins", "evictions", "vmm_calls",
                           "stalls", "prefetch_hits", "prefetch_misses", "iterations"}) {
    EXPECT_EQ(sum[name], records.back().totals.at(name)) << name;
  }
}

// The real daemon detects the iterations, profiles one and publishes policies; the shim binds
// and applies them. Compared with the same run with CHAMELEON_SWAP_POLICY=off (safety net only).
TEST(ExecutorDaemonTest, PoliciesFromTheDaemonReplaceSafetyNetFaults) {
  constexpr int kSteps = 10;
  const Result reference = RunCaptured(TrainerArgs("tensor", kSteps), SimEnv(8ull << 30));
  ASSERT_EQ(reference.status, 0);
  const std::uint64_t quarter = PeakOf(reference) / 4;
  char dir[] = "/tmp/chameleon_exec_daemon_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string socket = std::string(dir) + "/d.sock";
  ChildProcess daemon;
  ASSERT_TRUE(daemon.Start({CHAMELEON_DAEMON, "--config", "", "--socket", socket,
                            "--metrics-listen", "", "--log-level", "warn"},
                           {{"LD_PRELOAD", ""}}));
  // Another process creates the socket.
  struct stat st {};
  ASSERT_TRUE(chameleon::test_support::WaitFor([&] { return ::stat(socket.c_str(), &st) == 0; },
                                               std::chrono::seconds(20),
                                               std::chrono::milliseconds(5)))
      << "chameleond did not start";

  std::vector<chameleon::shim::testing::StatsRecord> records;
  const Result policy =
      RunCaptured(TrainerArgs("tensor", kSteps), LimitEnv(quarter, socket), &records);
  auto off_env = LimitEnv(quarter, socket);
  off_env["CHAMELEON_SWAP_POLICY"] = "off";
  const Result off = RunCaptured(TrainerArgs("tensor", kSteps), off_env);
  ::unlink(socket.c_str());
  ::rmdir(dir);

  ASSERT_EQ(policy.status, 0) << policy.err;
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_EQ(shim_test::TrainerResults(policy.out), shim_test::TrainerResults(reference.out));
  EXPECT_EQ(shim_test::TrainerResults(off.out), shim_test::TrainerResults(reference.out));
  EXPECT_LE(Field(policy.err, "high-water "), quarter);
  // Policy-driven: a generation was in force, its swap-ins had consumers (hits or misses are
  // counted only by policy waits), and the safety net had less to do than without it.
  EXPECT_GT(Stat(policy, "policy_generation"), 0u) << policy.err;
  EXPECT_GT(Stat(policy, "prefetch_hits") + Stat(policy, "prefetch_misses"), 0u) << policy.err;
  EXPECT_EQ(Stat(policy, "policy_ignored"), 0u);
  EXPECT_EQ(Stat(off, "policy_generation"), 0u);
  EXPECT_EQ(Stat(off, "prefetch_hits") + Stat(off, "prefetch_misses"), 0u);
  EXPECT_LT(Stat(policy, "fault_ins"), Stat(off, "fault_ins"));
  EXPECT_GT(Stat(policy, "iterations"), 0u);
  ExpectOneRecordPerIterationSummingToTheTotals(records, quarter);
}
#endif

// cuMemGetInfo under a limit: total = limit, free = limit - executor chunks in use - passed-
// through bytes; and the device's own figures without one.
std::vector<std::pair<std::uint64_t, std::uint64_t>> MemInfo(const Result& r) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> info;
  for (const std::string& l : r.out) {
    if (l.rfind("meminfo ", 0) != 0) continue;
    std::istringstream in(l.substr(8));
    std::uint64_t f = 0, t = 0;
    in >> f >> t;
    info.emplace_back(f, t);
  }
  return info;
}

TEST(ExecutorMemInfoTest, ReportsTheLimitNotTheDevice) {
  auto env = ShimEnv("/nonexistent/c.sock");
  env["SIMGPU_MEMORY"] = "1GiB";
  env["CHAMELEON_DEVICE_LIMIT"] = "64MiB";
  const Result r = RunCaptured({CHAMELEON_MEMINFO_PROG}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto info = MemInfo(r);
  ASSERT_EQ(info.size(), 4u);
  constexpr std::uint64_t kLimit = 64ull << 20;
  for (const auto& [free_bytes, total] : info) EXPECT_EQ(total, kLimit);
  EXPECT_EQ(info[0].first, kLimit);
  EXPECT_EQ(info[1].first, kLimit - (8u << 20));                // an executor allocation
  EXPECT_EQ(info[2].first, kLimit - (8u << 20) - (64u << 10));  // plus a passed-through one
  EXPECT_EQ(info[3].first, kLimit);                             // both freed
  EXPECT_NE(std::find(r.out.begin(), r.out.end(), "pointer-stable 1"), r.out.end());
}

TEST(ExecutorMemInfoTest, WithoutLimitOrDaemonTheDeviceIsReported) {
  auto env = ShimEnv("/nonexistent/c.sock");
  env["SIMGPU_MEMORY"] = "1GiB";
  const Result plain = RunCaptured({CHAMELEON_MEMINFO_PROG}, SimEnv(1ull << 30));
  const Result shim = RunCaptured({CHAMELEON_MEMINFO_PROG}, env);
  ASSERT_EQ(shim.status, 0) << shim.err;
  EXPECT_EQ(shim.out, plain.out);
  ASSERT_EQ(MemInfo(shim).size(), 4u);
  EXPECT_EQ(MemInfo(shim)[0].second, 1ull << 30);
}

TEST(ExecutorMemInfoTest, AnInvalidLimitIsReportedAndIgnored) {
  auto env = ShimEnv("/nonexistent/c.sock");
  env["SIMGPU_MEMORY"] = "1GiB";
  env["CHAMELEON_DEVICE_LIMIT"] = "64XB";
  const Result r = RunCaptured({CHAMELEON_MEMINFO_PROG}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("CHAMELEON_DEVICE_LIMIT='64XB' is not a byte count"), std::string::npos)
      << r.err;
  ASSERT_EQ(MemInfo(r).size(), 4u);
  EXPECT_EQ(MemInfo(r)[0].second, 1ull << 30);  // pass-through: the device's figures
}

// An allocation on a device the executor does not serve takes nothing from its pool: before,
// it was admitted against the executor's device, whose full pool was trimmed for it (stale
// ranges unmapped, a device synchronisation that drained every device's queue: three a step on
// a four-stage pipeline in one process).
TEST(ExecutorMemInfoTest, AnAllocationOnAnotherDeviceLeavesTheExecutorsPoolAlone) {
  auto env = ShimEnv("/nonexistent/c.sock");
  env["SIMGPU_DEVICES"] = "2";
  env["SIMGPU_MEMORY"] = "1GiB";
  env["CHAMELEON_DEVICE_LIMIT"] = "32MiB";
  env["CHAMELEON_STATS_FILE"] = StatsPath();
  const Result r = RunCaptured({CHAMELEON_MEMINFO_PROG, "other-device"}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(std::find(r.out.begin(), r.out.end(), "other-device ok"), r.out.end());
  ASSERT_TRUE(r.stats.count("unmaps")) << r.err;
  EXPECT_EQ(r.stats.at("unmaps"), 0u);
  EXPECT_EQ(r.stats.at("chunk_bytes"), 32ull << 20);  // the pool as the frees left it
}

}  // namespace
}  // namespace shim_test
