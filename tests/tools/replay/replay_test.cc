// chameleon-replay end to end on simgpu: the shared traces, determinism, recorded durations,
// corruption, perturbation, out-of-memory, profiles and malformed input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "chameleon/policy/profile_json.h"
#include "chameleon/trace/reader.h"
#include "chameleon/trace/workload.h"

namespace chameleon::replay {
namespace {

using ::testing::HasSubstr;

const std::string kTraces = std::string(CHAMELEON_TRACES_DIR) + "/";
const std::string kResnet = kTraces + "resnet_1gpu_et.json.gz";
const std::string kMegatron = kTraces + "megatron_et_0.json.gz";
const std::string kMegatronKineto = kTraces + "megatron_kineto_0.json.gz";

struct Result {
  int rc = -1;
  std::string out, err;
  std::vector<double> times;
  int peak_lines = 0;
  std::uint64_t peak = 0;
  std::string checksum;
  std::vector<int> shifts;
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/replay_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs chameleon-replay with simgpu's libcuda.so.1 on the library path and parses its output.
Result Replay(const std::string& args, const std::string& env = "") {
  TempDir dir;
  const std::string cmd = "env LD_LIBRARY_PATH=" + std::string(SIMGPU_LIB_DIR) + " " + env + " " +
                          REPLAY_BIN + " " + args + " >" + dir.File("out") + " 2>" +
                          dir.File("err");
  Result r;
  const int status = std::system(cmd.c_str());
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(dir.File("out"));
  r.err = Slurp(dir.File("err"));
  std::istringstream lines(r.out);
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("peak") != std::string::npos) ++r.peak_lines;
    if (std::regex_match(line, m, std::regex(R"(iteration (\d+) time ([0-9.]+))")))
      r.times.push_back(std::stod(m[2]));
    if (std::regex_match(line, m, std::regex(R"(peak (\d+))"))) r.peak = std::stoull(m[1]);
    if (std::regex_match(line, m, std::regex(R"(checksum ([0-9a-f]{16}))"))) r.checksum = m[1];
    if (std::regex_match(line, m, std::regex(R"(shift at iteration (\d+))")))
      r.shifts.push_back(std::stoi(m[1]));
  }
  return r;
}

std::uint64_t WorkloadPeak(const std::string& path) {
  return trace::PeakBytes(trace::BuildWorkload(trace::ReadTrace(path)));
}

class SharedTraceReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedTraceReplay, ShouldReplayFiveIterationsWithPeakTimeAndChecksum) {
  // The caching allocator reuses its segments; per-storage allocation (tested below) maps fresh
  // memory for each of the thousands of lifetimes, which is slow on a loaded 2-core host.
  const Result r = Replay(GetParam() + " --iterations 5 --alloc caching");
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(r.times.size(), 5u) << r.out;
  for (double t : r.times) EXPECT_GT(t, 0);
  EXPECT_EQ(r.peak_lines, 1) << "exactly one line mentions peak";
  EXPECT_EQ(r.peak, WorkloadPeak(GetParam()))
      << "the replay's allocations follow the trace's lifetimes";
  EXPECT_EQ(r.checksum.size(), 16u);
  std::printf("%s: peak %llu bytes, iteration time %.6f s\n", GetParam().c_str(),
              static_cast<unsigned long long>(r.peak), r.times[0]);
}

INSTANTIATE_TEST_SUITE_P(Traces, SharedTraceReplay, ::testing::Values(kResnet, kMegatron),
                         [](const auto& info) { return info.index == 0 ? "Resnet" : "Megatron"; });

TEST(Replay, ShouldBeDeterministicAndIndependentOfPlacement) {
  const Result a = Replay(kResnet + " --iterations 3");
  const Result b = Replay(kResnet + " --iterations 3");
  const Result c = Replay(kResnet + " --iterations 3 --alloc caching");
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.checksum, c.checksum) << "the checksum never depends on where memory is";
  EXPECT_EQ(a.peak, c.peak);
  ASSERT_EQ(a.times.size(), 3u);
  EXPECT_NEAR(a.times[0], a.times[2], 1e-5) << "ResNet's three recorded steps do the same work";
}

TEST(Replay, ShouldTakeMegatronIterationTimeFromKinetoDurations) {
  const nlohmann::json kineto = nlohmann::json::parse(trace::ReadMaybeGzip(kMegatronKineto));
  double device_s = 0;
  for (const auto& e : kineto["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset")
      device_s += e["dur"].get<double>() * 1e-6;
  }
  const Result with =
      Replay(kMegatron + " --iterations 1 --alloc caching --kineto " + kMegatronKineto);
  const Result without = Replay(kMegatron + " --iterations 1 --alloc caching");
  ASSERT_EQ(with.rc, 0) << with.err;
  ASSERT_EQ(with.times.size(), 1u);
  EXPECT_NEAR(with.times[0], device_s, 0.01 * device_s)
      << "recorded kernel time, within launch latencies";
  ASSERT_EQ(without.times.size(), 1u);
  EXPECT_GT(std::abs(without.times[0] - device_s), 0.05 * device_s)
      << "the cost model alone differs";
  EXPECT_THAT(with.err, HasSubstr("777 joined"));
}

TEST(Replay, FlippingOneInputByteShouldChangeTheChecksum) {
  const Result clean = Replay(kResnet + " --iterations 3 --alloc caching");
  const Result flipped =
      Replay(kResnet + " --iterations 3 --alloc caching --corrupt-at-iteration 1");
  ASSERT_EQ(flipped.rc, 0) << flipped.err;
  EXPECT_THAT(flipped.err, HasSubstr("flipped one byte"));
  EXPECT_NE(clean.checksum, flipped.checksum);
  EXPECT_EQ(clean.peak, flipped.peak);
}

TEST(Replay, PerturbationShouldShiftDeterministically) {
  const Result clean = Replay(kResnet + " --iterations 5 --alloc caching");
  const Result a = Replay(kResnet + " --iterations 5 --alloc caching --perturb 2:0.05");
  const Result b = Replay(kResnet + " --iterations 5 --alloc caching --perturb 2:0.05");
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.shifts, (std::vector<int>{2, 4}));
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.checksum, clean.checksum);
  ASSERT_EQ(a.times.size(), 5u);
  EXPECT_EQ(a.times[1], clean.times[1]) << "iterations before the first shift are untouched";
  EXPECT_NE(a.times[2], clean.times[2]);
}

TEST(Replay, ShouldReportOutOfMemoryForBothAllocators) {
  for (const char* alloc : {"tensor", "caching"}) {
    const Result r = Replay(kResnet + " --iterations 1 --alloc " + alloc, "SIMGPU_MEMORY=1GiB");
    EXPECT_NE(r.rc, 0) << alloc;
    EXPECT_THAT(r.err, HasSubstr("out of memory")) << alloc;
    EXPECT_EQ(r.checksum, "") << alloc;
  }
}

TEST(Replay, ShouldEmitTheProfileOfOneIteration) {
  TempDir dir;
  const Result r = Replay(kResnet + " --iterations 1 --emit-profile " + dir.File("p.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  const policy::Profile p = policy::ProfileFromJson(Slurp(dir.File("p.json")));
  const trace::Workload w = trace::BuildWorkload(trace::ReadTrace(kResnet));
  EXPECT_EQ(p.ops.size(), w.steps[0].end_op - w.steps[0].first_op);
  ASSERT_EQ(r.times.size(), 1u);
  EXPECT_NEAR(p.iteration_s, r.times[0], 1e-6);
  std::uint64_t max_live = 0;
  for (const auto& op : p.ops) max_live = std::max(max_live, op.bytes_live_after);
  EXPECT_EQ(max_live, r.peak);
  // Each op carries the device time its kernel was given (the cost model here: no Kineto file),
  // and the driver only adds to them: they sum to at most the iteration's virtual time.
  double device_s = 0;
  for (std::uint32_t k = w.steps[0].first_op; k < w.steps[0].end_op; ++k) {
    const auto& op = p.ops[k - w.steps[0].first_op];
    EXPECT_DOUBLE_EQ(op.device_s, trace::OpSeconds(w.ops[k])) << "op " << k;
    device_s += op.device_s;
  }
  EXPECT_GT(device_s, 0);
  EXPECT_LE(device_s, p.iteration_s + 1e-9);
}

// One file is one rank's trace: a folder of ranks or two files is a usage error (exit 2), caught
// before anything runs.
TEST(Replay, ShouldRefuseAFolderOrASetOfRanksWhereOneFileIsExpected) {
  const Result folder = Replay(kTraces);
  EXPECT_EQ(folder.rc, 2);
  EXPECT_EQ(folder.peak_lines, 0);
  EXPECT_TRUE(folder.times.empty());
  const Result ranks = Replay(kMegatron + " " + kResnet);
  EXPECT_EQ(ranks.rc, 2);
  EXPECT_EQ(ranks.peak_lines, 0);
  EXPECT_TRUE(ranks.times.empty());
}

TEST(Replay, ShouldRejectMalformedTraceWithItsName) {
  TempDir dir;
  std::filesystem::copy_file(kMegatron, dir.File("cut.json.gz"));
  std::filesystem::resize_file(dir.File("cut.json.gz"), 1000);
  const Result r = Replay(dir.File("cut.json.gz"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("cut.json.gz"));
  EXPECT_EQ(r.peak_lines, 0);
  const Result usage = Replay(kResnet + " --perturb 0:2");
  EXPECT_EQ(usage.rc, 2);
  EXPECT_THAT(usage.err, HasSubstr("--perturb expects K:P"));
}

}  // namespace
}  // namespace chameleon::replay
