#include "chameleon/daemon/iteration_tracker.h"

#include <gtest/gtest.h>

#include "chameleon/daemon/boundary_detector.h"
#include "synthetic_stream.h"

namespace chameleon::daemon {
namespace {

using testing::LoopSpec;
using testing::MakeLoop;
using testing::SyntheticStream;

/// Detects the boundary on the first `detect_steps` steps, then tracks the whole stream.
IterationTracker Track(const SyntheticStream& stream, std::size_t detect_steps,
                       const DetectionOptions& options, std::vector<IterationEvent>* events) {
  const std::size_t end = stream.step_starts[detect_steps];
  const auto boundary = DetectBoundary(std::span(stream.tokens).first(end), {});
  EXPECT_TRUE(boundary.has_value());
  IterationTracker tracker(boundary ? boundary->signature : std::vector<std::uint32_t>{0}, options);
  for (std::size_t i = boundary ? boundary->first : 0; i < stream.tokens.size(); ++i) {
    if (tracker.Add(stream.tokens[i]) && events != nullptr) events->push_back(tracker.last_event());
  }
  return tracker;
}

TEST(IterationTracker, ReachesStableAtIterationMPlusNPlusThree) {
  LoopSpec spec;
  const auto stream = MakeLoop(spec, 20);
  DetectionOptions options;
  std::vector<IterationEvent> events;
  Track(stream, 6, options, &events);
  ASSERT_GE(events.size(), 12u);
  int stable_at = 0;
  for (const auto& e : events) {
    EXPECT_EQ(e.ops, stream.step_ops[0]);
    if (stable_at == 0 && e.step.after == Stage::kStable) stable_at = static_cast<int>(e.index);
  }
  EXPECT_EQ(stable_at, options.stage_m + options.stage_n + 3);
}

TEST(IterationTracker, EveryTrueShiftOfADynamicLoopIsDetectedWithinOneIteration) {
  for (int k : {3, 5, 8}) {
    LoopSpec spec;
    spec.dynamic = k;
    spec.perturb_rate = 0.01;
    spec.seed = static_cast<std::uint64_t>(k);
    const auto stream = MakeLoop(spec, 120);
    DetectionOptions options;
    std::vector<IterationEvent> events;
    // Detect on steps the branch has not switched yet (k steps) plus a few more.
    const auto tracker = Track(stream, 2 * k + 4, options, &events);
    // Iteration i (1-based) is step i - 1; a shift at step N shows in iteration N + 1.
    std::vector<int> detected;
    for (std::uint64_t index : tracker.shift_log()) detected.push_back(static_cast<int>(index) - 1);
    ASSERT_FALSE(stream.shift_steps.empty());
    for (int truth : stream.shift_steps) {
      bool found = false;
      for (int d : detected) found |= std::abs(d - truth) <= 1;
      EXPECT_TRUE(found) << "k=" << k << ": true shift at step " << truth << " not detected";
    }
    // Nothing but the true shifts (each detected once).
    EXPECT_EQ(detected.size(), stream.shift_steps.size()) << "k=" << k;
  }
}

/// Steps whose perturbed ops are not similar to the previous step's (ground truth on true cuts).
int TrulyUnstableSteps(const SyntheticStream& stream) {
  int unstable = 0;
  for (std::size_t i = 2; i < stream.step_starts.size(); ++i) {
    const auto a = std::span(stream.tokens)
                       .subspan(stream.step_starts[i - 2],
                                stream.step_starts[i - 1] - stream.step_starts[i - 2]);
    const auto b =
        std::span(stream.tokens)
            .subspan(stream.step_starts[i - 1], stream.step_starts[i] - stream.step_starts[i - 1]);
    unstable += !CompareIterations(a, b, {}).stable;
  }
  return unstable;
}

TEST(IterationTracker, NoFalseShiftsOverTwoHundredPerturbedIterations) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    LoopSpec spec;
    spec.layers = 12;
    spec.perturb_rate = 0.01;
    spec.seed = seed;
    const auto stream = MakeLoop(spec, 202);
    // The perturbations stay below the thresholds on the true cuts ...
    ASSERT_EQ(TrulyUnstableSteps(stream), 0) << "seed " << seed;
    DetectionOptions options;
    const auto tracker = Track(stream, 8, options, nullptr);
    // ... so the daemon's own cuts must not see a shift either.
    EXPECT_GE(tracker.iterations(), 195u) << "seed " << seed;
    EXPECT_EQ(tracker.shifts(), 0u) << "seed " << seed;
    EXPECT_EQ(tracker.stage(), Stage::kStable) << "seed " << seed;
  }
}

TEST(IterationTracker, ASignatureOpInsertedMidIterationDoesNotCut) {
  std::vector<std::uint32_t> step;
  for (std::uint32_t t = 16; t < 56; ++t) step.push_back(t);
  IterationTracker tracker({16}, DetectionOptions{});
  for (int i = 0; i < 5; ++i)
    for (auto t : step) tracker.Add(t);
  const auto before = tracker.iterations();  // 4: the fifth step is still open
  auto odd = step;
  odd.insert(odd.begin() + 5, 16);  // a stray boundary op early in the step
  for (auto t : odd) tracker.Add(t);
  tracker.Add(16);
  EXPECT_EQ(tracker.iterations(), before + 2);
  EXPECT_EQ(tracker.ignored_matches(), 1u);
  EXPECT_EQ(tracker.last_event().ops, 41u);
  EXPECT_TRUE(tracker.last_event().comparison.stable);
}

TEST(IterationTracker, ALostBoundaryOpMergesTwoIterationsWithoutAShift) {
  std::vector<std::uint32_t> step;
  for (std::uint32_t t = 16; t < 56; ++t) step.push_back(t);
  IterationTracker tracker({16}, DetectionOptions{});
  for (int i = 0; i < 14; ++i) {
    for (std::size_t j = 0; j < step.size(); ++j) {
      if (i == 8 && j == 0) continue;  // the boundary op of step 8 was never recorded
      tracker.Add(step[j]);
    }
  }
  EXPECT_EQ(tracker.discarded(), 1u);
  EXPECT_EQ(tracker.shifts(), 0u);
  EXPECT_EQ(tracker.stage(), Stage::kStable);
}

TEST(IterationTracker, MultiOpSignatureStartsTheIterationAtItsFirstOp) {
  // Signature "1 1" (two uploads); the ops before it belong to the previous iteration.
  const std::vector<std::uint32_t> step{1, 1, 20, 21, 1, 22, 2};
  IterationTracker tracker({1, 1}, DetectionOptions{});
  for (int i = 0; i < 4; ++i)
    for (auto t : step) tracker.Add(t);
  tracker.Add(1);
  EXPECT_EQ(tracker.iterations(), 3u);
  tracker.Add(1);
  EXPECT_EQ(tracker.iterations(), 4u);
  EXPECT_EQ(tracker.last_event().ops, step.size());
  EXPECT_DOUBLE_EQ(tracker.last_event().comparison.similarity, 1.0);
}

TEST(IterationTracker, ShouldLogEveryEntryIntoStableAfterEachShift) {
  DetectionOptions options;
  IterationTracker tracker({1}, options);
  auto feed = [&](const std::vector<std::uint32_t>& step, int times) {
    for (int i = 0; i < times; ++i) {
      for (std::uint32_t t : step) tracker.Add(t);
    }
  };
  feed({1, 2, 3, 4, 5, 6, 7, 8}, 12);  // cuts 11 iterations: STABLE at the (m + n + 3)-th
  ASSERT_EQ(tracker.stable_log().size(), 1u);
  const int m_n_3 = options.stage_m + options.stage_n + 3;
  EXPECT_EQ(tracker.stable_log()[0], std::uint64_t(m_n_3));
  // The loop changes for good (a longer step): one shift, then STABLE again m + n + 2 iterations
  // after it (the shifted iteration itself is the first of the new sequence).
  feed({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, 12);
  ASSERT_EQ(tracker.shift_log().size(), 1u);
  ASSERT_EQ(tracker.stable_log().size(), 2u);
  EXPECT_EQ(tracker.stable_log()[1] - tracker.shift_log()[0], std::uint64_t(m_n_3 - 1));
}

// PlanMemory's key: each compared iteration carries its exact op sequence; the iterations of one
// sequence agree, a shift to another changes it, and the return gives the first key back.
TEST(IterationTracker, EachIterationCarriesTheKeyOfItsExactOpSequence) {
  LoopSpec spec;
  spec.dynamic = 8;  // aux branch on in steps 8-15: other ops, another key; off again from 16
  const auto stream = MakeLoop(spec, 20);
  DetectionOptions options;
  std::vector<IterationEvent> events;
  const IterationTracker tracker = Track(stream, 8, options, &events);
  for (const IterationEvent& e : events) EXPECT_EQ(e.sequence.ops, e.ops) << e.index;
  // Iteration i is step i - 1.
  const auto key_of_step = [&](int step) {
    for (const IterationEvent& e : events) {
      if (e.index == static_cast<std::uint64_t>(step) + 1) return e.sequence;
    }
    ADD_FAILURE() << "no iteration of step " << step;
    return SequenceKey{};
  };
  EXPECT_EQ(key_of_step(3), key_of_step(6));
  EXPECT_NE(key_of_step(6), key_of_step(10));
  EXPECT_EQ(key_of_step(10), key_of_step(13));
  EXPECT_EQ(key_of_step(17), key_of_step(6));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(tracker.last_sequence(), events.back().sequence);
}

TEST(IterationTracker, ResumeStableIsLoggedAtTheLastIterationCut) {
  LoopSpec spec;
  const auto stream = MakeLoop(spec, 8);
  DetectionOptions options;
  IterationTracker tracker = Track(stream, 6, options, nullptr);
  ASSERT_NE(tracker.stage(), Stage::kStable);  // 7 iterations cut: GEN_POLICY
  const StageStep step = tracker.ResumeStable();
  EXPECT_TRUE(step.changed());
  EXPECT_EQ(tracker.stage(), Stage::kStable);
  ASSERT_EQ(tracker.stable_log().size(), 1u);
  EXPECT_EQ(tracker.stable_log().back(), tracker.iterations());
}

}  // namespace
}  // namespace chameleon::daemon
