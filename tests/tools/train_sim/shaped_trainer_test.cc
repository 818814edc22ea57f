// chameleon-train-sim --model end to end: options, output format, determinism, equal checksums
// across --recompute and allocation styles, corruption detection and hand-computed byte counts.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "trainer_runner.h"

namespace {

using namespace train_sim_test;

// One Llama 2 7B layer on 8 tokens: nominally 7.4 GB, but sampled kernels touch a few MB.
const std::vector<std::string> kTinyLlama = {
    "--model", "llama2-7b", "--layers", "1", "--seq", "8", "--micro-batch", "1", "--steps", "3"};
// Two GPT-2 XL layers, unfused attention (stored scores and dropout masks), 5-way tensor
// parallelism (25 heads) with sequence parallelism.
const std::vector<std::string> kTinyGpt2 = {
    "--model", "gpt2-xl", "--layers",          "2",   "--seq",   "60", "--micro-batch", "2",
    "--tp",    "5",       "--flash-attention", "off", "--steps", "2"};

unsigned long long Figure(const std::string& out, const std::string& name) {
  const auto lines = LinesWith(out, name + " ");
  return lines.size() == 1 ? std::stoull(lines[0].substr(name.size() + 1)) : 0;
}

std::vector<std::string> Digests(const std::string& out) {
  std::vector<std::string> digests;
  for (const auto& line : LinesWith(out, "step "))
    digests.push_back(line.substr(0, line.find(" time ")));
  return digests;
}

TEST(ShapedTrainerTest, ShouldRejectEveryBadValueWithExitCodeTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"--model", "gpt5"},
      {"--model", "llama2-7b", "--micro-batch", "0"},
      {"--model", "llama2-7b", "--tp", "3"},      // 32 heads
      {"--model", "llama3-8b", "--tp", "16"},     // 8 KV heads
      {"--model", "llama2-7b", "--seq", "5000"},  // context 4096
      {"--model", "gpt2-xl", "--seq", "2048"},    // context 1024
      {"--model", "gpt2-xl", "--layers", "49"},
      {"--model", "llama2-7b", "--tp", "2", "--seq", "7"},  // sequence parallel: 7 % 2
      {"--model", "llama2-7b", "--sequence-parallel", "maybe"},
      {"--model", "llama2-7b", "--flash-attention", "yes"},
      {"--model", "llama2-7b", "--hidden", "64"},
      {"--model", "llama2-7b", "--steps", "2", "--corrupt-at-step", "2"},
      {"--micro-batch", "2"},
      {"--tp", "2"},
  };
  for (const auto& args : bad) {
    const RunResult r = RunTrainer(args);
    EXPECT_TRUE(r.exited && r.code == 2) << args[0] << " " << args[1] << ": " << r.code;
    EXPECT_FALSE(r.err.empty()) << args[1];
    EXPECT_TRUE(LinesWith(r.out, "checksum ").empty());
  }
}

TEST(ShapedTrainerTest, ShouldPrintTheDocumentedFormatAndRepeatItExactly) {
  const RunResult a = RunTrainer(kTinyLlama);
  ASSERT_TRUE(a.exited && a.code == 0) << a.err;
  const auto lines = Lines(a.out);
  ASSERT_EQ(lines.size(), 8u) << a.out;
  const std::regex step(R"(step [0-9]+ digest [0-9a-f]{16} time [0-9]+\.[0-9]{6})");
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::regex_match(lines[i], step)) << lines[i];
    EXPECT_EQ(lines[i].rfind("step " + std::to_string(i) + " ", 0), 0u);
  }
  EXPECT_TRUE(std::regex_match(
      lines[3], std::regex(R"(phases forward [0-9.]+ backward [0-9.]+ optimizer [0-9.]+)")));
  EXPECT_TRUE(std::regex_match(lines[7], std::regex("checksum [0-9a-f]{16}")));
  EXPECT_NE(Digests(a.out)[0], Digests(a.out)[1]);  // digests depend on the step
  const RunResult b = RunTrainer(kTinyLlama);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

// Llama 2 7B, one layer, 8 tokens, tp 1. Parameters: embedding and head 32000 * 4096 each,
// norms 3 * 4096, wqkv 4096 * 12288, wo 4096^2, fc1 4096 * 22016, fc2 11008 * 4096:
// N = 464,531,456. Persistent: 2 + 4 + 4 + 4 bytes each; optimizer state 12 bytes each. Peak:
// at the embedding's backward every bf16 gradient (2N) is live, with the 65,536-byte gradient of
// the embedding output and tokens, targets and digest (32 + 32 + 8).
TEST(ShapedTrainerTest, ShouldReportHandComputedByteCounts) {
  const RunResult r = RunTrainer(kTinyLlama);
  ASSERT_EQ(r.code, 0) << r.err;
  const unsigned long long n = 464531456ull;
  EXPECT_EQ(Figure(r.out, "persistent"), 14 * n);
  EXPECT_EQ(Figure(r.out, "optimizer-state"), 12 * n);
  EXPECT_EQ(Figure(r.out, "peak"), 16 * n + 65536 + 72);
}

TEST(ShapedTrainerTest, ShouldGiveTheSameChecksumUnderRecomputeAndEveryAllocStyle) {
  for (const auto& base : {kTinyLlama, kTinyGpt2}) {
    const RunResult plain = RunTrainer(base);
    ASSERT_EQ(plain.code, 0) << plain.err;
    ASSERT_FALSE(Checksum(plain.out).empty());
    const std::vector<std::vector<std::string>> extras = {{"--recompute"},
                                                          {"--alloc", "caching"},
                                                          {"--alloc", "expandable"},
                                                          {"--recompute", "--alloc", "caching"}};
    for (const auto& extra : extras) {
      const RunResult other = RunTrainer(With(base, extra));
      ASSERT_EQ(other.code, 0) << extra[0] << ": " << other.err;
      EXPECT_EQ(Checksum(other.out), Checksum(plain.out)) << base[1] << " " << extra.back();
      EXPECT_EQ(Digests(other.out), Digests(plain.out)) << base[1] << " " << extra.back();
    }
  }
}

// Two GPT-2 XL layers, 8 x 1024 tokens, stored scores: about 1.5 GB of activations per layer
// against 0.3 GB of gradients, so the peak is the activations' and recompute lowers it.
TEST(ShapedTrainerTest, ShouldLowerTheActivationPeakUnderRecompute) {
  const std::vector<std::string> base = {
      "--model",       "gpt2-xl", "--layers",          "2",   "--seq",   "1024",
      "--micro-batch", "8",       "--flash-attention", "off", "--steps", "1"};
  const RunResult plain = RunTrainer(base);
  const RunResult recompute = RunTrainer(With(base, {"--recompute"}));
  ASSERT_TRUE(plain.code == 0 && recompute.code == 0) << plain.err << recompute.err;
  EXPECT_LT(Figure(recompute.out, "peak"), Figure(plain.out, "peak"));
  EXPECT_GT(Figure(plain.out, "peak") - Figure(recompute.out, "peak"), 1000000000ull);
  EXPECT_EQ(Figure(recompute.out, "persistent"), Figure(plain.out, "persistent"));
  EXPECT_EQ(Checksum(recompute.out), Checksum(plain.out));
}

TEST(ShapedTrainerTest, ShouldChangeTheChecksumWhenOneActivationGranuleIsLost) {
  for (const auto& base : {kTinyLlama, kTinyGpt2}) {
    const RunResult clean = RunTrainer(base);
    ASSERT_EQ(clean.code, 0) << clean.err;
    const std::vector<std::vector<std::string>> extras = {
        {"--corrupt-at-step", "0"}, {"--corrupt-at-step", "1", "--recompute"}};
    for (const auto& extra : extras) {
      const RunResult corrupt = RunTrainer(With(base, extra));
      ASSERT_EQ(corrupt.code, 0) << corrupt.err;
      EXPECT_NE(Checksum(corrupt.out), Checksum(clean.out)) << base[1] << " " << extra.back();
    }
  }
}

TEST(ShapedTrainerTest, ShouldShardTheModelUnderTensorParallelism) {
  const RunResult one =
      RunTrainer({"--model", "llama2-7b", "--layers", "2", "--seq", "16", "--steps", "1"});
  const RunResult two = RunTrainer(
      {"--model", "llama2-7b", "--layers", "2", "--seq", "16", "--steps", "1", "--tp", "2"});
  ASSERT_TRUE(one.code == 0 && two.code == 0) << one.err << two.err;
  // Every matrix (embedding and head by vocabulary) is split in two; the five 4096-element norms
  // (two per layer, one final) are replicated: 14 bytes * 5 * 4096 / 2 more than half.
  EXPECT_EQ(Figure(two.out, "persistent"), Figure(one.out, "persistent") / 2 + 7 * 5 * 4096);
}

TEST(ShapedTrainerTest, ShouldReportShiftsUnderDynamic) {
  const RunResult r = RunTrainer(
      {"--model", "llama2-7b", "--layers", "1", "--seq", "8", "--steps", "6", "--dynamic", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The auxiliary branch is on in steps 2-3; step 5 skips the optimizer (options.cc).
  EXPECT_EQ(LinesWith(r.out, "shift at step ").size(), 3u) << r.out;
  EXPECT_EQ(LinesWith(r.out, "shift at step 2").size(), 1u);
  EXPECT_EQ(LinesWith(r.out, "shift at step 4").size(), 1u);
  EXPECT_EQ(LinesWith(r.out, "shift at step 5").size(), 1u);
}

}  // namespace
