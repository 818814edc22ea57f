#include "chameleon/daemon/loop_boundary.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "synthetic_stream.h"

namespace chameleon::daemon {
namespace {

using testing::LoopSpec;
using testing::MakeLoop;

class LoopBoundaryTest : public ::testing::Test {
 protected:
  /// Feeds `tokens` as the session does: to the history, or to the tracker once there is one.
  void Feed(const std::vector<std::uint32_t>& tokens, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      const LoopBoundary::Route route = loop_.Remember(tokens[i]);
      confirmed_ += route == LoopBoundary::Route::kConfirmed ? 1 : 0;
      if (route != LoopBoundary::Route::kTracker) continue;
      if (loop_.tracker()->Add(tokens[i])) ++iterations_seen_;
      lost_ += loop_.CheckLost() ? 1 : 0;
    }
  }

  /// Feeds `tokens` from `from` on, running detection whenever the boundary wants it, as the
  /// daemon does when its worker answers before the next op.
  void FeedDetecting(const std::vector<std::uint32_t>& tokens, std::size_t from) {
    for (std::size_t i = from; i < tokens.size(); ++i) {
      Feed(tokens, i, i + 1);
      if (loop_.WantsDetection(0)) DetectAndInstall(0);
    }
  }

  /// What the daemon's worker does with a snapshot (server.cc, Jobs::Detect), with ops
  /// [busy_from, busy_to) of `tokens` arriving while it works; `*before` (if given): the
  /// iterations its tracker cut from the snapshot.
  LoopBoundary::Installed DetectAndInstall(std::uint64_t now_ns,
                                           const std::vector<std::uint32_t>& tokens = {},
                                           std::size_t busy_from = 0, std::size_t busy_to = 0,
                                           std::uint64_t* before = nullptr) {
    const std::vector<std::uint32_t> snapshot = loop_.TakeSnapshot(now_ns);
    Feed(tokens, busy_from, busy_to);
    std::optional<Boundary> boundary = DetectBoundary(snapshot, {});
    std::optional<IterationTracker> tracker;
    if (boundary) {
      tracker.emplace(boundary->signature, options_);
      for (std::size_t i = boundary->first; i < snapshot.size(); ++i) tracker->Add(snapshot[i]);
      if (before) *before = tracker->iterations();
    }
    return loop_.Install(boundary, std::move(tracker), snapshot.size(),
                         [&](const IterationEvent&) { ++iterations_seen_; });
  }

  ClientIdentity who_;
  DetectionOptions options_;
  LoopBoundary loop_{who_, options_};
  int iterations_seen_ = 0;
  int lost_ = 0;
  int confirmed_ = 0;
};

TEST_F(LoopBoundaryTest, TheFirstDetectionWaitsForSixtyFourOps) {
  const auto stream = MakeLoop(LoopSpec{}, 10);
  Feed(stream.tokens, 0, 63);
  EXPECT_FALSE(loop_.WantsDetection(0));
  Feed(stream.tokens, 63, 64);
  EXPECT_TRUE(loop_.WantsDetection(0));
  loop_.TakeSnapshot(0);
  EXPECT_FALSE(loop_.WantsDetection(0));  // in flight
}

TEST_F(LoopBoundaryTest, AFailedDetectionWaitsForTheHistoryToGrowByAQuarter) {
  const auto stream = MakeLoop(LoopSpec{}, 10);
  Feed(stream.tokens, 0, 64);
  const auto snapshot = loop_.TakeSnapshot(0);
  EXPECT_EQ(loop_.Install(std::nullopt, std::nullopt, snapshot.size(), [](auto&) {}),
            LoopBoundary::Installed::kNo);
  Feed(stream.tokens, 64, 80);
  EXPECT_FALSE(loop_.WantsDetection(1));  // 80 < 64 + 16 + 1
  Feed(stream.tokens, 80, 81);
  EXPECT_TRUE(loop_.WantsDetection(1));
}

TEST_F(LoopBoundaryTest, ASmallStalledHistoryIsRetriedAfterAQuarterSecond) {
  const auto stream = MakeLoop(LoopSpec{}, 10);
  Feed(stream.tokens, 0, 64);
  const auto snapshot = loop_.TakeSnapshot(1'000);
  loop_.Install(std::nullopt, std::nullopt, snapshot.size(), [](auto&) {});
  Feed(stream.tokens, 64, 70);
  EXPECT_FALSE(loop_.WantsDetection(1'000 + 250'000'000));
  EXPECT_TRUE(loop_.WantsDetection(1'000 + 250'000'001));
}

TEST_F(LoopBoundaryTest, ADetectedBoundaryReplaysTheOpsThatArrivedMeanwhile) {
  const auto stream = MakeLoop(LoopSpec{}, 20);
  const std::size_t detect_at = stream.step_starts[6];
  Feed(stream.tokens, 0, detect_at);
  std::uint64_t before = 0;
  ASSERT_EQ(DetectAndInstall(0, stream.tokens, detect_at, stream.step_starts[9], &before),
            LoopBoundary::Installed::kYes);
  EXPECT_EQ(iterations_seen_, 3);  // three whole periods arrived after the snapshot
  EXPECT_EQ(loop_.iterations(), before + 3);
  EXPECT_EQ(loop_.history_ops(), 0u);
  EXPECT_EQ(loop_.period(), loop_.boundary()->period);
  EXPECT_EQ(loop_.period(), stream.step_ops[0]);
  EXPECT_FALSE(loop_.WantsDetection(~0ull));
  EXPECT_FALSE(loop_.pattern());
}

TEST_F(LoopBoundaryTest, ALostBoundaryRestartsDetectionFromTheRecentOps) {
  const auto stream = MakeLoop(LoopSpec{}, 20);
  Feed(stream.tokens, 0, stream.step_starts[6]);
  ASSERT_EQ(DetectAndInstall(0), LoopBoundary::Installed::kYes);
  Feed(stream.tokens, stream.step_starts[6], stream.step_starts[10]);
  const std::uint64_t iterations = loop_.iterations();
  const std::uint64_t ops = loop_.tracker()->iteration_ops();
  ASSERT_GT(ops, 0u);
  // A different loop: the old signature never comes again.
  std::vector<std::uint32_t> other;
  for (std::uint64_t i = 0; i <= 4 * ops; ++i) other.push_back(100 + i % 7);
  Feed(other, 0, other.size());
  EXPECT_EQ(lost_, 1);
  EXPECT_EQ(loop_.losses(), 1u);
  EXPECT_EQ(loop_.tracker(), nullptr);
  EXPECT_EQ(loop_.iterations(), iterations);  // kept over the life of the client
  // Every op since the boundary was installed: the recent ring (it did not wrap), then history.
  EXPECT_EQ(loop_.history_ops(), stream.step_starts[10] - stream.step_starts[6] + other.size());
  EXPECT_TRUE(loop_.WantsDetection(0));
}

TEST_F(LoopBoundaryTest, APatternSetsTheBoundaryAndIsNeverLost) {
  options_.boundary_patterns = {"step_*"};
  EXPECT_FALSE(loop_.TryPattern(7, "gemm"));
  EXPECT_TRUE(loop_.TryPattern(9, "step_start"));
  EXPECT_TRUE(loop_.pattern());
  ASSERT_NE(loop_.tracker(), nullptr);
  EXPECT_EQ(loop_.tracker()->signature(), std::vector<std::uint32_t>{9});
  std::vector<std::uint32_t> tokens;
  for (int i = 0; i < 5; ++i) tokens.insert(tokens.end(), {9, 30, 31, 32});
  for (int i = 0; i < 100; ++i) tokens.push_back(40);  // no boundary for a long while
  Feed(tokens, 0, tokens.size());
  EXPECT_EQ(iterations_seen_, 4);
  EXPECT_EQ(lost_, 0);
  EXPECT_FALSE(loop_.WantsDetection(~0ull));
  // A late detection result loses to the pattern.
  EXPECT_EQ(
      loop_.Install(Boundary{{30}, 4, 0, 3}, IterationTracker({30}, options_), 0, [](auto&) {}),
      LoopBoundary::Installed::kNo);
  EXPECT_EQ(loop_.tracker()->signature(), std::vector<std::uint32_t>{9});
}

TEST_F(LoopBoundaryTest, ShouldLetAPatternReplaceADetectedBoundary) {
  // Detection settled on a short period (a repeated layer) before the pattern's kernel was first
  // launched: the kernel's name, when it arrives, still sets the boundary.
  options_.boundary_patterns = {"aten::max"};
  std::vector<std::uint32_t> tokens;
  for (int i = 0; i < 8; ++i) tokens.insert(tokens.end(), {30, 31, 32, 33});
  Feed(tokens, 0, tokens.size());
  ASSERT_EQ(loop_.Install(Boundary{{30}, 4, 0, 3}, IterationTracker({30}, options_), tokens.size(),
                          [](auto&) {}),
            LoopBoundary::Installed::kYes);
  for (int i = 0; i < 4; ++i) Feed({30, 31, 32, 33}, 0, 4);
  const std::uint64_t iterations = loop_.iterations();
  ASSERT_GT(iterations, 0u);
  EXPECT_FALSE(loop_.TryPattern(40, "aten::add"));
  EXPECT_EQ(loop_.tracker()->signature(), std::vector<std::uint32_t>{30});
  EXPECT_TRUE(loop_.TryPattern(41, "aten::max"));
  EXPECT_TRUE(loop_.pattern());
  EXPECT_EQ(loop_.replaced(), 1u);
  ASSERT_NE(loop_.tracker(), nullptr);
  EXPECT_EQ(loop_.tracker()->signature(), std::vector<std::uint32_t>{41});
  EXPECT_EQ(loop_.tracker()->stage(), Stage::kWarmup);  // stages start again for the new cut
  EXPECT_EQ(loop_.iterations(), iterations);            // the old cuts still count
  // A second matching kernel does not move the boundary again.
  EXPECT_FALSE(loop_.TryPattern(42, "aten::max"));
  EXPECT_EQ(loop_.tracker()->signature(), std::vector<std::uint32_t>{41});
}

TEST_F(LoopBoundaryTest, ShouldHoldALayerRunAtTheEndOfAPartlySeenStepUntilTheStreamRefutesIt) {
  // The first step's 42 forward ops, then the backward pass's six identical 8-op layers: in the
  // first 101 ops that is a loop of period 8 after a set-up, and the detector says so.
  const auto stream = MakeLoop(LoopSpec{.prelude_ops = 0}, 10);
  const std::size_t step = stream.step_ops[0];
  Feed(stream.tokens, 0, 101);
  ASSERT_EQ(DetectAndInstall(0), LoopBoundary::Installed::kPending);
  ASSERT_TRUE(loop_.boundary().has_value());
  EXPECT_EQ(loop_.boundary()->period, 8u);
  EXPECT_TRUE(loop_.pending());
  EXPECT_EQ(loop_.tracker(), nullptr);  // nothing acts on it yet
  EXPECT_EQ(loop_.iterations(), 0u);
  // The layers end: no recurrence within four periods refutes it, and detection goes on over
  // every op seen so far until it finds the step.
  FeedDetecting(stream.tokens, 101);
  EXPECT_EQ(loop_.rejected(), 1u);
  EXPECT_EQ(confirmed_, 0);
  ASSERT_NE(loop_.tracker(), nullptr);
  EXPECT_FALSE(loop_.pending());
  EXPECT_EQ(loop_.period(), step);
  EXPECT_EQ(loop_.losses(), 0u);
  EXPECT_EQ(lost_, 0);
}

TEST_F(LoopBoundaryTest, ShouldRejectAPendingLoopWhoseNextIterationIsLonger) {
  // A step shaped like the first pipeline stage's op stream in a 1F1B schedule: a 40-op head (the
  // warm-up forwards), six 8-op blocks (forward and backward of one micro-batch each), then four
  // 14-op blocks that begin with the same op (the cool-down's backwards). Over its first 88 ops
  // that is a loop of period 8 after a set-up, pending. Its signature recurs every 14 ops after
  // the run, so it never goes missing for four periods, and at op 160 the loop would cover three
  // quarters of the stream and come into force (it did, before: every later cut a shift, the
  // stages run on blocks). The first 14-op cut is a shift: rejected there.
  std::vector<std::uint32_t> tokens;
  constexpr int kSteps = 8;
  for (int step = 0; step < kSteps; ++step) {
    for (std::uint32_t i = 0; i < 40; ++i) tokens.push_back(500 + i);
    for (int block = 0; block < 6; ++block) {
      for (std::uint32_t i = 0; i < 8; ++i) tokens.push_back(1 + i);
    }
    for (int block = 0; block < 4; ++block) {
      tokens.push_back(1);
      for (std::uint32_t i = 0; i < 13; ++i) tokens.push_back(100 + i);
    }
  }
  constexpr std::size_t kStepOps = 40 + 6 * 8 + 4 * 14;
  ASSERT_EQ(tokens.size(), kSteps * kStepOps);
  Feed(tokens, 0, 88);
  ASSERT_EQ(DetectAndInstall(0), LoopBoundary::Installed::kPending);
  EXPECT_EQ(loop_.boundary()->period, 8u);
  EXPECT_EQ(loop_.boundary()->signature, std::vector<std::uint32_t>{1});
  Feed(tokens, 88, 102);  // the run's last block is cut: still pending
  EXPECT_TRUE(loop_.pending());
  Feed(tokens, 102, 103);  // the first 14-op block is cut: a shift
  EXPECT_FALSE(loop_.pending());
  EXPECT_EQ(loop_.rejected(), 1u);
  EXPECT_EQ(loop_.tracker(), nullptr);
  // Detection goes on over everything seen and finds the step; no block run was ever in force.
  FeedDetecting(tokens, 103);
  EXPECT_EQ(confirmed_, 0);
  EXPECT_EQ(loop_.losses(), 0u);
  ASSERT_NE(loop_.tracker(), nullptr);
  EXPECT_EQ(loop_.period(), kStepOps);
}

TEST_F(LoopBoundaryTest, ShouldConfirmAPendingLoopAfterALongSetUpOnceItCoversThreeQuarters) {
  // 300 set-up ops before five steps: the loop covers less than three quarters of the history.
  const auto stream = MakeLoop(LoopSpec{.prelude_ops = 300}, 14);
  Feed(stream.tokens, 0, stream.step_starts[5]);
  ASSERT_EQ(DetectAndInstall(0), LoopBoundary::Installed::kPending);
  const std::uint64_t period = loop_.boundary()->period;
  EXPECT_EQ(period, stream.step_ops[0]);
  // It recurs twice past the history, and that is not enough while the set-up is more than a
  // quarter of what was seen: a layer run recurs as often before it ends.
  const std::size_t firm = 4 * loop_.boundary()->first;
  ASSERT_GT(firm, stream.step_starts[7] + 1);
  Feed(stream.tokens, stream.step_starts[5], firm - 1);
  EXPECT_TRUE(loop_.pending());
  EXPECT_EQ(confirmed_, 0);
  EXPECT_EQ(loop_.tracker(), nullptr);
  Feed(stream.tokens, firm - 1, firm);  // the op that makes the loop three quarters of the stream
  EXPECT_EQ(confirmed_, 1);
  EXPECT_FALSE(loop_.pending());
  ASSERT_NE(loop_.tracker(), nullptr);
  EXPECT_EQ(loop_.period(), period);
  EXPECT_EQ(loop_.history_ops(), 0u);
  EXPECT_EQ(loop_.found_at_iteration(), loop_.tracker()->iterations());
  // From here the caller feeds the tracker.
  // A step is cut at the last op of its signature.
  const std::size_t last_of_signature = loop_.boundary()->signature.size() - 1;
  const std::uint64_t iterations = loop_.iterations();
  const auto next = std::upper_bound(stream.step_starts.begin(), stream.step_starts.end(), firm);
  ASSERT_NE(next, stream.step_starts.end());
  Feed(stream.tokens, firm, *next + last_of_signature + 1);
  EXPECT_EQ(loop_.iterations(), iterations + 1);
  EXPECT_EQ(iterations_seen_, 1);
}

TEST_F(LoopBoundaryTest, ShouldConfirmAPendingLoopFromTheOpsThatArrivedDuringDetection) {
  const auto stream = MakeLoop(LoopSpec{.prelude_ops = 300}, 14);
  Feed(stream.tokens, 0, stream.step_starts[5]);
  std::uint64_t before = 0;
  ASSERT_EQ(
      DetectAndInstall(0, stream.tokens, stream.step_starts[5], stream.step_starts[12], &before),
      LoopBoundary::Installed::kYes);
  ASSERT_TRUE(loop_.boundary().has_value());
  // Seven steps were cut from the ops that arrived (each at the last op of its signature): those
  // cut before the loop covered three quarters of the stream confirmed it, the others were cut
  // in force.
  const std::size_t firm = 4 * loop_.boundary()->first;
  const std::size_t last_of_signature = loop_.boundary()->signature.size() - 1;
  int in_force = 0;
  for (std::size_t j = 5; j < 12; ++j) {
    in_force += stream.step_starts[j] + last_of_signature >= firm ? 1 : 0;
  }
  ASSERT_GT(in_force, 0);
  ASSERT_LT(in_force, 7);
  EXPECT_EQ(loop_.iterations(), before + 7);
  EXPECT_EQ(iterations_seen_, in_force);
  EXPECT_EQ(loop_.history_ops(), 0u);
}

}  // namespace
}  // namespace chameleon::daemon
