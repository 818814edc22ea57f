// chameleon-train-sim --pipeline / --micro-batches end to end on four simgpu devices: the
// checksum does not depend on the number of stages (nor on --recompute or the allocation
// style), the printed per-device peaks show 1F1B's shape (stage i holds N - i micro-batches),
// and a per-device limit between the peaks stops the run on device 0 only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "trainer_runner.h"

namespace {

using namespace train_sim_test;

const std::vector<std::string> kFourDevices = {"SIMGPU_DEVICES=4"};
// Four Llama 2 7B layers on 64 tokens, 4 micro-batches of one sequence, 2 steps.
const std::vector<std::string> kSmall = {
    "--model", "llama2-7b", "--layers", "4", "--seq", "64", "--steps", "2", "--micro-batches", "4"};

unsigned long long DevicePeak(const std::string& out, int device) {
  const std::string prefix = "device " + std::to_string(device) + " peak ";
  const auto lines = LinesWith(out, prefix);
  return lines.size() == 1 ? std::stoull(lines[0].substr(prefix.size())) : 0;
}

std::vector<std::string> Digests(const std::string& out) {
  std::vector<std::string> digests;
  for (const auto& line : LinesWith(out, "step "))
    digests.push_back(line.substr(0, line.find(" time ")));
  return digests;
}

RunResult RunOnFour(const std::vector<std::string>& args,
                    std::vector<std::string> env = kFourDevices) {
  return RunTrainer(args, env);
}

TEST(PipelineTrainerTest, ShouldMatchThePlainTrainerWithOneStageAndOneMicroBatch) {
  const std::vector<std::string> plain = {"--model", "llama2-7b", "--layers", "2",
                                          "--seq",   "64",        "--steps",  "2"};
  const RunResult a = RunOnFour(plain);
  const RunResult b = RunOnFour(With(plain, {"--pipeline", "1", "--micro-batches", "1"}));
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  ASSERT_FALSE(Checksum(a.out).empty());
  EXPECT_EQ(Checksum(b.out), Checksum(a.out));
  EXPECT_EQ(Digests(b.out), Digests(a.out));
  EXPECT_EQ(Peak(b.out), DevicePeak(b.out, 0));
}

TEST(PipelineTrainerTest, ShouldGiveTheSameChecksumWhateverTheStagesRecomputeAndAllocStyle) {
  const RunResult one = RunOnFour(With(kSmall, {"--pipeline", "1"}));
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_FALSE(Checksum(one.out).empty());
  // Micro-batches are not a no-op: four of them train on other data than one.
  const RunResult single = RunOnFour(With(kSmall, {"--pipeline", "1", "--micro-batches", "1"}));
  EXPECT_NE(Checksum(single.out), Checksum(one.out));
  const std::vector<std::vector<std::string>> variants = {
      {"--pipeline", "2"},
      {"--pipeline", "4"},
      {"--pipeline", "3", "--alloc", "caching"},
      {"--pipeline", "4", "--alloc", "expandable"},
      {"--pipeline", "4", "--recompute"},
      {"--pipeline", "4", "--recompute", "--alloc", "caching"}};
  for (const auto& extra : variants) {
    const RunResult r = RunOnFour(With(kSmall, extra));
    ASSERT_EQ(r.code, 0) << extra[1] << ": " << r.err;
    EXPECT_EQ(Checksum(r.out), Checksum(one.out)) << extra[1] << " " << extra.back();
    EXPECT_EQ(Digests(r.out), Digests(one.out)) << extra[1] << " " << extra.back();
    const int stages = std::stoi(extra[1]);
    for (int d = 0; d < stages; ++d) EXPECT_GT(DevicePeak(r.out, d), 0u) << d;
    EXPECT_EQ(DevicePeak(r.out, stages), 0u);  // exactly one line per stage
  }
}

// Four layers of Llama 2 7B, one per stage, 4 sequences of 4096 tokens per micro-batch: about
// 2.2 GB of saved activations per micro-batch and layer against 0.4-0.7 GB of gradients per
// stage. Stages 1 and 2 hold the same layer shapes, so in the steady state (M = 2N, every
// gradient allocated) their peaks differ by exactly one micro-batch's activations A. Each stage
// i's peak then rises from M = 1 (one micro-batch in flight) by N - 1 - i micro-batches, up to
// the gradients that M = 1 had not all allocated at its peak (less than A / 2).
TEST(PipelineTrainerTest, ShouldHoldNMicroBatchesOnStageZeroAndOneOnTheLast) {
  const std::vector<std::string> base = {"--model", "llama2-7b", "--layers",      "4",
                                         "--seq",   "4096",      "--micro-batch", "4",
                                         "--steps", "1",         "--pipeline",    "4"};
  const RunResult m1 = RunOnFour(With(base, {"--micro-batches", "1"}));
  const RunResult m2 = RunOnFour(With(base, {"--micro-batches", "2"}));
  const RunResult m4 = RunOnFour(With(base, {"--micro-batches", "4"}));
  const RunResult m8 = RunOnFour(With(base, {"--micro-batches", "8"}));
  for (const RunResult* r : {&m1, &m2, &m4, &m8}) ASSERT_EQ(r->code, 0) << r->err;
  const double a = double(DevicePeak(m8.out, 1)) - double(DevicePeak(m8.out, 2));
  ASSERT_GT(a, 1e9);
  for (int i = 0; i < 4; ++i) {
    const double held = (double(DevicePeak(m8.out, i)) - double(DevicePeak(m1.out, i))) / a;
    EXPECT_NEAR(held, 4 - 1 - i, 0.5) << "stage " << i;
  }
  // The last stage holds one micro-batch's activations whatever M: once every gradient exists
  // (M >= 2) its peak grows only by the data uploaded at the step's start, each micro-batch's
  // targets (4 x 4096 int32) and 8-byte digest.
  const unsigned long long data = 4 * 4096 * 4 + 8;
  EXPECT_EQ(DevicePeak(m4.out, 3) - DevicePeak(m2.out, 3), 2 * data);
  EXPECT_EQ(DevicePeak(m8.out, 3) - DevicePeak(m4.out, 3), 4 * data);
  // The total is the node's: at least the largest device's, at most their sum.
  unsigned long long sum = 0, largest = 0;
  for (int i = 0; i < 4; ++i) {
    sum += DevicePeak(m8.out, i);
    largest = std::max(largest, DevicePeak(m8.out, i));
  }
  EXPECT_GE(Peak(m8.out), largest);
  EXPECT_LE(Peak(m8.out), sum);
}

TEST(PipelineTrainerTest, ShouldRunOutOfMemoryOnDeviceZeroOnlyBetweenThePeaks) {
  const std::vector<std::string> base = {
      "--model", "llama2-7b", "--layers",   "4", "--seq",           "4096", "--micro-batch", "2",
      "--steps", "1",         "--pipeline", "4", "--micro-batches", "8"};
  const RunResult unlimited = RunOnFour(base, {"SIMGPU_DEVICES=4", "SIMGPU_MEMORY=1T"});
  ASSERT_EQ(unlimited.code, 0) << unlimited.err;
  const unsigned long long p0 = DevicePeak(unlimited.out, 0);
  unsigned long long others = 0;
  for (int i = 1; i < 4; ++i) others = std::max(others, DevicePeak(unlimited.out, i));
  ASSERT_GT(p0, others + (64ull << 20));  // stage 0 holds the most
  const unsigned long long limit = (p0 + others) / 2;
  const RunResult limited =
      RunOnFour(base, {"SIMGPU_DEVICES=4", "SIMGPU_MEMORY=" + std::to_string(limit)});
  EXPECT_TRUE(limited.exited && limited.code == 3) << limited.code << " " << limited.err;
  EXPECT_TRUE(Checksum(limited.out).empty());
  // A limit just above device 0's peak (the tensor allocator's 512-byte rounding and the
  // digest's slack) runs.
  const RunResult fits =
      RunOnFour(base, {"SIMGPU_DEVICES=4", "SIMGPU_MEMORY=" + std::to_string(p0 + (64ull << 20))});
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_EQ(Checksum(fits.out), Checksum(unlimited.out));
}

TEST(PipelineTrainerTest, ShouldRejectPipelinesThatCannotRun) {
  const std::vector<std::vector<std::string>> bad = {
      {"--model", "llama2-7b", "--layers", "2", "--pipeline", "3"},  // more stages than layers
      {"--model", "gpt2-xl", "--layers", "2", "--pipeline", "2"},    // tied embedding
      {"--model", "llama2-7b", "--layers", "2", "--pipeline", "2", "--dynamic", "2"},
      {"--model", "llama2-7b", "--pipeline", "0"},
      {"--model", "llama2-7b", "--micro-batches", "0"},
      {"--pipeline", "2"},  // needs --model
  };
  for (const auto& args : bad) {
    const RunResult r = RunOnFour(args);
    EXPECT_TRUE(r.exited && r.code == 2) << args.back() << ": " << r.code;
    EXPECT_TRUE(Checksum(r.out).empty());
  }
  // More stages than devices: a driver-side refusal, exit 1, no output.
  const RunResult few =
      RunOnFour({"--model", "llama2-7b", "--layers", "2", "--seq", "8", "--pipeline", "2"},
                {"SIMGPU_DEVICES=1"});
  EXPECT_TRUE(few.exited && few.code == 1) << few.code;
  EXPECT_TRUE(Checksum(few.out).empty());
}

}  // namespace
