#include "chameleon/daemon/candidate_trials.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace chameleon::daemon {
namespace {

/// Three configurations told apart by their margin.
std::vector<policy::GeneratorOptions> ThreeConfigs() {
  std::vector<policy::GeneratorOptions> configs(3);
  for (std::size_t i = 0; i < configs.size(); ++i) configs[i].prefetch_margin = 0.1 * double(i);
  return configs;
}

ipc::Policy PolicyPredicting(double seconds) {
  ipc::Policy policy;
  policy.summary.predicted_iteration_s = seconds;
  return policy;
}

/// Takes the next configuration and publishes its candidate as `generation`.
void TakeAndAdd(CandidateTrials& trials, std::uint64_t generation, double predicted) {
  std::uint32_t index = 0;
  trials.Take(&index);
  trials.Finished("");
  trials.Add(generation, PolicyPredicting(predicted));
}

TEST(CandidateTrials, OneCandidateAtATimeEachAfterTheLastIsMeasured) {
  CandidateTrials trials(ThreeConfigs());
  EXPECT_FALSE(trials.WantsNext(CandidateTrials::Marks::kGeneration));  // no GEN_POLICY step yet
  trials.Restart();
  ASSERT_TRUE(trials.WantsNext(CandidateTrials::Marks::kGeneration));
  std::uint32_t index = 9;
  EXPECT_DOUBLE_EQ(trials.Take(&index).prefetch_margin, 0.0);
  EXPECT_EQ(index, 0u);
  EXPECT_FALSE(trials.WantsNext(CandidateTrials::Marks::kGeneration));  // in flight
  trials.Finished("");
  trials.Add(5, PolicyPredicting(1.0));
  trials.StepPassed();
  EXPECT_FALSE(
      trials.WantsNext(CandidateTrials::Marks::kGeneration));    // candidate 5 not measured yet
  EXPECT_TRUE(trials.WantsNext(CandidateTrials::Marks::kNone));  // 1.0 marks: one per step
  // Its first measurement lets the next one go without waiting for another step.
  EXPECT_TRUE(trials.Credit(5, 0.9, true));
  EXPECT_TRUE(trials.WantsNext(CandidateTrials::Marks::kGeneration));
  EXPECT_DOUBLE_EQ(trials.Take(&index).prefetch_margin, 0.1);
  EXPECT_EQ(index, 1u);
}

// With marks that say what the shim's executor installed, the next candidate is planned while the
// last one is on trial and published the moment the shim installed the last one: no iteration
// between two trials runs a candidate already measured.
TEST(CandidateTrials, ShouldPlanTheNextCandidateWhileTheLastIsOnTrial) {
  using Marks = CandidateTrials::Marks;
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  ASSERT_TRUE(trials.WantsNext(Marks::kInstalled));
  EXPECT_TRUE(trials.MayPublish(Marks::kInstalled));  // nothing on trial yet
  TakeAndAdd(trials, 5, 1.0);
  // Not measured, not even installed: planned ahead all the same ...
  ASSERT_TRUE(trials.WantsNext(Marks::kInstalled));
  EXPECT_FALSE(trials.WantsNext(Marks::kGeneration));
  std::uint32_t index = 0;
  trials.Take(&index);
  EXPECT_EQ(index, 1u);
  trials.Finished("");
  // ... but kept until the shim installed generation 5, which it would otherwise replace unrun.
  EXPECT_FALSE(trials.MayPublish(Marks::kInstalled));
  EXPECT_TRUE(trials.MayPublish(Marks::kGeneration));
  trials.Hold(PolicyPredicting(2.0));
  EXPECT_FALSE(trials.WantsNext(Marks::kInstalled));  // one ahead at most
  EXPECT_TRUE(trials.Pending(true));
  EXPECT_FALSE(trials.Installed(4));  // not the one on trial
  const std::uint64_t before = trials.progress();
  EXPECT_TRUE(trials.Installed(5));
  EXPECT_FALSE(trials.Installed(5));     // once
  EXPECT_GT(trials.progress(), before);  // the stage hold sees progress
  EXPECT_TRUE(trials.MayPublish(Marks::kInstalled));
  std::optional<ipc::Policy> ready = trials.TakeReady();
  ASSERT_TRUE(ready.has_value());
  EXPECT_DOUBLE_EQ(ready->summary.predicted_iteration_s, 2.0);
  EXPECT_FALSE(trials.TakeReady().has_value());
  trials.Add(6, *ready);
  EXPECT_TRUE(trials.WantsNext(Marks::kInstalled));
  // Interval crediting is unchanged: 5's interval still counts for 5.
  EXPECT_FALSE(trials.Credit(5, 0.9, true));  // not the last candidate's first measurement
  EXPECT_EQ(trials.candidates()[0].samples, 1u);
  // A new sequence drops what was planned ahead.
  trials.Take(&index);
  trials.Finished("");
  trials.Hold(PolicyPredicting(3.0));
  trials.Restart();
  EXPECT_FALSE(trials.TakeReady().has_value());
}

TEST(CandidateTrials, CreditsTheBestIntervalOnlyWhileMeasuring) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  EXPECT_FALSE(trials.Credit(5, 0.7, false));  // not GEN_POLICY: frozen
  EXPECT_EQ(trials.candidates()[0].samples, 0u);
  EXPECT_TRUE(trials.Credit(5, 0.9, true));
  EXPECT_FALSE(trials.Credit(5, 0.8, true));  // not the first measurement
  EXPECT_FALSE(trials.Credit(5, 1.2, true));  // a one-off stall does not count
  EXPECT_FALSE(trials.Credit(4, 0.1, true));  // another generation's interval
  EXPECT_EQ(trials.candidates()[0].samples, 3u);
  EXPECT_DOUBLE_EQ(trials.candidates()[0].measured_s, 0.8);
}

TEST(CandidateTrials, BestIsTheFastestMeasuredOrTheFirstWhenNoneIs) {
  CandidateTrials trials(ThreeConfigs());
  EXPECT_EQ(trials.Best(), nullptr);
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  TakeAndAdd(trials, 6, 1.0);
  TakeAndAdd(trials, 7, 1.0);
  EXPECT_EQ(trials.Best()->generation, 5u);  // nothing measured
  trials.Credit(6, 0.9, true);
  EXPECT_EQ(trials.Best()->generation, 6u);  // measured beats unmeasured
  trials.Credit(7, 0.5, true);
  trials.Credit(5, 0.6, true);
  EXPECT_EQ(trials.Best()->generation, 7u);
}

/// Takes the next configuration under pointer-exclusion version `exclusions` and publishes its
/// candidate as `generation`, measured at `measured_s`.
void TakeAndAddUnder(CandidateTrials& trials, std::uint64_t exclusions, std::uint64_t generation,
                     double measured_s) {
  std::uint32_t index = 0;
  trials.Take(&index, exclusions);
  trials.Finished("");
  trials.Add(generation, PolicyPredicting(1.0));
  trials.Credit(generation, measured_s, true);
}

// A pointer target reported after a candidate was planned may be a tensor that candidate swaps
// and the shim now pins: its fast measurement is of a plan short of memory. Candidates planned
// under the current exclusions win over it; only when none is, the stale ones compete.
TEST(CandidateTrials, ShouldChooseOnlyAmongCandidatesPlannedUnderTheCurrentExclusions) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAddUnder(trials, 0, 5, 0.5);  // the fastest, planned before the report
  TakeAndAddUnder(trials, 1, 6, 0.9);
  TakeAndAddUnder(trials, 1, 7, 0.8);
  EXPECT_EQ(trials.Stale(1), 1u);
  EXPECT_EQ(trials.Best(1)->generation, 7u);
  EXPECT_EQ(trials.Stale(2), 3u);             // a report after all of them:
  EXPECT_EQ(trials.Best(2)->generation, 5u);  // every one is stale, the fastest still wins
}

// The same swaps planned again under newer exclusions are valid under them: the earlier
// candidate, which the duplicate is not published apart from, becomes current.
TEST(CandidateTrials, ADuplicatePlannedUnderNewerExclusionsMakesItsTwinCurrent) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAddUnder(trials, 0, 5, 0.5);
  TakeAndAddUnder(trials, 1, 6, 0.9);
  std::uint32_t index = 0;
  trials.Take(&index, 1);
  trials.Finished("");
  trials.AddDuplicate(5);
  EXPECT_EQ(trials.Stale(1), 0u);
  EXPECT_EQ(trials.Best(1)->generation, 5u);
}

TEST(CandidateTrials, TheChosenPolicyKeepsMeasuringUnderItsRepublishedGeneration) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  trials.Credit(5, 0.9, true);
  trials.Choose(trials.Best(), 8);
  trials.Credit(8, 0.7, false);  // STABLE: the chosen copy is credited, the candidate frozen
  nlohmann::json j;
  trials.Describe(8, 0.7, &j);
  EXPECT_EQ(j["chosen"]["measured_iteration_s"].get<double>(), 0.7);
  EXPECT_EQ(j["candidates"][0]["measured_iteration_s"].get<double>(), 0.9);
  EXPECT_EQ(j["in_force"]["generation"].get<std::uint64_t>(), 8u);
  EXPECT_EQ(j["in_force"]["predicted_iteration_s"].get<double>(), 1.0);
  // Under a generation nobody knows, nothing is predicted.
  trials.Describe(99, 0.7, &j);
  EXPECT_TRUE(j["in_force"]["predicted_iteration_s"].is_null());
}

TEST(CandidateTrials, ShouldReplaceTheChosenPlanByItsReplanAndKeepItsConfiguration) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  trials.Credit(5, 0.9, true);
  TakeAndAdd(trials, 6, 1.0);
  trials.Credit(6, 0.8, true);  // the second configuration wins
  trials.Choose(trials.Best(), 8);
  ASSERT_NE(trials.chosen(), nullptr);
  EXPECT_EQ(trials.chosen()->config, 1u);
  EXPECT_DOUBLE_EQ(trials.config(trials.chosen()->config).prefetch_margin, 0.1);
  trials.Rechoose(9, PolicyPredicting(0.85));  // ReserveFeedback's re-plan of it
  EXPECT_EQ(trials.chosen()->config, 1u);
  EXPECT_EQ(trials.chosen()->samples, 0u);  // measured afresh
  trials.Credit(8, 0.5, false);             // the old generation no longer counts for it
  trials.Credit(9, 0.81, false);
  nlohmann::json j;
  trials.Describe(9, 0.81, &j);
  EXPECT_EQ(j["chosen"]["generation"].get<std::uint64_t>(), 9u);
  EXPECT_EQ(j["chosen"]["measured_iteration_s"].get<double>(), 0.81);
  EXPECT_EQ(j["in_force"]["predicted_iteration_s"].get<double>(), 0.85);
  // A configuration index past the end (SetConfigs shrank them) reads the last one.
  EXPECT_DOUBLE_EQ(trials.config(7).prefetch_margin, 0.2);
}

TEST(CandidateTrials, PendingUntilEveryConfigurationIsMeasured) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  EXPECT_TRUE(trials.Pending(true));
  EXPECT_FALSE(trials.Pending(false));  // no device limit: nothing to plan for
  std::uint64_t generation = 5;
  for (int i = 0; i < 3; ++i) {
    std::uint32_t index = 0;
    trials.Take(&index);
    EXPECT_TRUE(trials.Pending(false));  // in flight
    trials.Finished("");
    trials.Add(generation, PolicyPredicting(1.0));
    EXPECT_TRUE(trials.Pending(true));
    trials.Credit(generation++, 1.0, true);
  }
  EXPECT_FALSE(trials.Pending(true));
  EXPECT_EQ(trials.progress(), 3u + 3u + 1u);  // taken, published, the last measured
}

TEST(CandidateTrials, AProfileTheGeneratorCannotPlanIsNotPending) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  std::uint32_t index = 0;
  trials.Take(&index);
  trials.Finished("infeasible");
  EXPECT_FALSE(trials.Pending(true));
  nlohmann::json j;
  trials.Describe(0, 0, &j);
  EXPECT_EQ(j["error"], "infeasible");
}

TEST(CandidateTrials, LegacyCreditGoesToTheAppliedGeneration) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  TakeAndAdd(trials, 6, 1.0);
  trials.CreditApplied(6, 0.4);
  EXPECT_EQ(trials.candidates()[0].samples, 0u);
  EXPECT_EQ(trials.candidates()[1].samples, 1u);
  EXPECT_DOUBLE_EQ(trials.candidates()[1].measured_s, 0.4);
}

TEST(CandidateTrials, RestartTriesEveryConfigurationAgain) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  trials.Restart();
  EXPECT_TRUE(trials.candidates().empty());
  std::uint32_t index = 9;
  trials.Take(&index);
  EXPECT_EQ(index, 0u);
}

/// A policy of `swaps` entries told apart by their bytes (`base` + i).
ipc::Policy PolicyWithSwaps(int swaps, std::uint64_t base, double predicted) {
  ipc::Policy policy = PolicyPredicting(predicted);
  for (int i = 0; i < swaps; ++i) {
    ipc::SwapEntry e{};
    e.bytes = base + std::uint64_t(i);
    e.out_token = 40;
    policy.entries.push_back(e);
  }
  return policy;
}

TEST(CandidateTrials, ShouldCollapseCandidatesThatPlanTheSameSwaps) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  std::uint32_t index = 0;
  trials.Take(&index);
  trials.Finished("");
  const ipc::Policy first = PolicyWithSwaps(2, 100, 1.0);
  ASSERT_EQ(trials.Find(first), nullptr);
  trials.Add(5, first);
  trials.Credit(5, 0.9, true);
  const std::uint64_t before = trials.progress();
  // The second configuration plans the same swaps (its prediction differs: another margin).
  trials.Take(&index);
  trials.Finished("");
  const ipc::Policy same = PolicyWithSwaps(2, 100, 1.2);
  const CandidateTrials::Candidate* found = trials.Find(same);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->generation, 5u);
  trials.AddDuplicate(found->generation);
  EXPECT_EQ(trials.duplicates(), 1u);
  EXPECT_GT(trials.progress(), before);  // the stage hold sees progress
  // Nothing new to measure: the third configuration is wanted without another step.
  EXPECT_TRUE(trials.WantsNext(CandidateTrials::Marks::kGeneration));
  trials.Take(&index);
  EXPECT_EQ(index, 2u);
  trials.Finished("");
  // One entry different, or the same entries with another exclusion list: a distinct policy.
  EXPECT_EQ(trials.Find(PolicyWithSwaps(2, 101, 1.0)), nullptr);
  ipc::Policy excluded = PolicyWithSwaps(2, 100, 1.0);
  excluded.excluded = {77};
  EXPECT_EQ(trials.Find(excluded), nullptr);
  EXPECT_EQ(trials.Find(PolicyWithSwaps(3, 100, 1.0)), nullptr);
  trials.Add(6, PolicyWithSwaps(2, 101, 1.0));
  EXPECT_EQ(trials.candidates().size(), 2u);  // three configurations, two distinct candidates
  // Every configuration is taken; pending only until the last distinct one is measured.
  EXPECT_TRUE(trials.Pending(true));
  trials.Credit(6, 0.8, true);
  EXPECT_FALSE(trials.Pending(true));
  nlohmann::json j;
  trials.Describe(6, 0.8, &j);
  EXPECT_EQ(j["duplicates"].get<int>(), 1);
  // A new sequence tries every configuration again, duplicates included.
  trials.Restart();
  EXPECT_EQ(trials.duplicates(), 0u);
}

TEST(CandidateTrials, ShouldCollapseEmptyPlans) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  EXPECT_NE(trials.Find(PolicyPredicting(2.0)), nullptr);  // no swaps either: the same policy
}

}  // namespace
TEST(CandidateTrials, SuspendKeepsTheMeasuredAndPlansTheUnmeasuredAgainOnResume) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);  // configuration 0, measured
  trials.Credit(5, 0.9, true);
  TakeAndAdd(trials, 6, 1.1);  // configuration 1, published, not measured yet
  const CandidateTrials::Progress progress = trials.Suspend();
  ASSERT_EQ(progress.candidates.size(), 2u) << "kept: its time may still arrive (Credit)";
  EXPECT_EQ(progress.next, 2u);

  trials.Restart();  // another sequence's trials meanwhile
  TakeAndAdd(trials, 8, 2.0);
  trials.Resume(progress);
  ASSERT_EQ(trials.candidates().size(), 1u);
  EXPECT_EQ(trials.candidates()[0].generation, 5u);
  EXPECT_DOUBLE_EQ(trials.candidates()[0].measured_s, 0.9);
  EXPECT_EQ(trials.chosen(), nullptr);
  ASSERT_TRUE(trials.WantsNext(CandidateTrials::Marks::kGeneration));
  std::uint32_t index = 9;
  trials.Take(&index);
  EXPECT_EQ(index, 1u);
}

TEST(CandidateTrials, ASuspendedCandidateIsCreditedOnlyForIntervalsBeforeTheShift) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  CandidateTrials::Progress progress = trials.Suspend();
  progress.credit_before = 20;  // the other sequence's first iteration began at boundary 20
  EXPECT_FALSE(progress.Credit(5, 20, 0.5)) << "ran the other sequence";
  EXPECT_FALSE(progress.Credit(6, 19, 0.5)) << "no such candidate";
  EXPECT_TRUE(progress.Credit(5, 19, 0.7));
  trials.Restart();
  trials.Resume(progress);
  ASSERT_EQ(trials.candidates().size(), 1u) << "measured late, so kept";
  EXPECT_DOUBLE_EQ(trials.candidates()[0].measured_s, 0.7);
}

TEST(CandidateTrials, ACandidateBeingGeneratedWhenSuspendedIsPlannedAgain) {
  CandidateTrials trials(ThreeConfigs());
  trials.Restart();
  TakeAndAdd(trials, 5, 1.0);
  trials.Credit(5, 0.9, true);
  std::uint32_t index = 0;
  trials.Take(&index);  // configuration 1 with a worker
  EXPECT_EQ(trials.Suspend().next, 1u);
}

TEST(CandidateTrials, EachRestartAndResumeIsANewRound) {
  CandidateTrials trials(ThreeConfigs());
  const std::uint64_t first = trials.round();
  trials.Restart();
  const std::uint64_t second = trials.round();
  EXPECT_NE(second, first);
  trials.Resume(trials.Suspend());
  EXPECT_NE(trials.round(), second);
  // A worker of an earlier round finishing lets the next one go.
  std::uint32_t index = 0;
  trials.Take(&index);
  EXPECT_FALSE(trials.WantsNext(CandidateTrials::Marks::kInstalled));
  trials.Restart();
  trials.Dropped();
  EXPECT_TRUE(trials.WantsNext(CandidateTrials::Marks::kInstalled));
}

}  // namespace chameleon::daemon
