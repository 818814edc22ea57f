#include "chameleon/daemon/plan_memory.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

SequenceKey Sequence(std::initializer_list<std::uint32_t> tokens) {
  SequenceKey key;
  for (std::uint32_t t : tokens) key.Add(t);
  return key;
}

/// A remembered plan of `sequence` whose chosen candidate was published as `generation`.
PlanMemory::Plan PlanFor(const SequenceKey& sequence, std::uint64_t generation,
                         std::uint64_t limit = 1 << 30, std::uint64_t exclusions = 0) {
  PlanMemory::Plan plan;
  plan.sequence = sequence;
  plan.chosen = CandidateTrials::Candidate{};
  plan.chosen->generation = generation;
  plan.device_limit = limit;
  plan.exclusions = exclusions;
  return plan;
}

TEST(SequenceKey, EqualSequencesGiveEqualKeysAndOrderMatters) {
  EXPECT_EQ(Sequence({1, 2, 3}), Sequence({1, 2, 3}));
  EXPECT_EQ(Sequence({1, 2, 3}).ops, 3u);
  EXPECT_NE(Sequence({1, 2, 3}), Sequence({1, 3, 2}));
  EXPECT_NE(Sequence({1, 2, 3}), Sequence({1, 2, 3, 3}));
  // Tokens differing only in a high byte are told apart (every byte is hashed).
  EXPECT_NE(Sequence({0x01000000u}), Sequence({0x02000000u}));
  EXPECT_EQ(SequenceKey{}, Sequence({}));
}

TEST(PlanMemory, RecallsThePlanOfTheSameSequenceLimitAndExclusionsOnly) {
  PlanMemory memory(4);
  const SequenceKey a = Sequence({1, 2, 3}), b = Sequence({1, 2, 4});
  memory.Remember(PlanFor(a, 7, 1000, 3));
  const PlanMemory::Plan* hit = memory.Recall(a, 1000, 3);
  ASSERT_NE(hit, nullptr);
  ASSERT_TRUE(hit->chosen.has_value());
  EXPECT_EQ(hit->chosen->generation, 7u);
  EXPECT_EQ(memory.Recall(b, 1000, 3), nullptr);  // another sequence
  EXPECT_EQ(memory.Recall(a, 2000, 3), nullptr);  // planned for another limit
  EXPECT_EQ(memory.Recall(a, 1000, 4), nullptr);  // a pointer target reported since
  EXPECT_EQ(memory.recalls(), 1u);
}

TEST(PlanMemory, ALaterPlanOfTheSameSequenceReplacesTheEarlierOne) {
  PlanMemory memory(4);
  const SequenceKey a = Sequence({5, 6});
  memory.Remember(PlanFor(a, 3));
  memory.Remember(PlanFor(a, 9));  // a re-plan with a larger reserve
  EXPECT_EQ(memory.size(), 1u);
  const PlanMemory::Plan* hit = memory.Recall(a, 1 << 30, 0);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->chosen->generation, 9u);
}

TEST(PlanMemory, WhenFullTheLeastRecentlyUsedGoes) {
  PlanMemory memory(2);
  const SequenceKey a = Sequence({1}), b = Sequence({2}), c = Sequence({3});
  memory.Remember(PlanFor(a, 1));
  memory.Remember(PlanFor(b, 2));
  ASSERT_NE(memory.Recall(a, 1 << 30, 0), nullptr);  // a is now the most recently used
  memory.Remember(PlanFor(c, 3));                    // b goes
  EXPECT_EQ(memory.size(), 2u);
  EXPECT_NE(memory.Recall(a, 1 << 30, 0), nullptr);
  EXPECT_EQ(memory.Recall(b, 1 << 30, 0), nullptr);
  EXPECT_NE(memory.Recall(c, 1 << 30, 0), nullptr);
  memory.SetCapacity(1);  // a live options update: the least recently used (a) goes
  EXPECT_EQ(memory.size(), 1u);
  EXPECT_NE(memory.Recall(c, 1 << 30, 0), nullptr);
}

TEST(PlanMemory, CapacityZeroRemembersNothingAndClearForgetsAll) {
  PlanMemory off(0);
  off.Remember(PlanFor(Sequence({1}), 1));
  EXPECT_EQ(off.size(), 0u);
  EXPECT_EQ(off.Recall(Sequence({1}), 1 << 30, 0), nullptr);
  PlanMemory memory(4);
  memory.Remember(PlanFor(Sequence({1}), 1));
  memory.Remember(PlanFor(Sequence({2}), 2));
  memory.Clear();
  EXPECT_EQ(memory.size(), 0u);
  EXPECT_EQ(memory.Recall(Sequence({1}), 1 << 30, 0), nullptr);
}

}  // namespace
TEST(PlanMemory, APlanInProgressIsResumedOnceAndNeverRecalled) {
  PlanMemory memory(4);
  const SequenceKey a = Sequence({1, 2, 3}), b = Sequence({4, 5});
  PlanMemory::Plan partial;
  partial.sequence = a;
  partial.device_limit = 1000;
  partial.exclusions = 3;  // resumed whatever the version now: its profile holds every tensor
  partial.progress = CandidateTrials::Progress{};
  partial.progress->next = 2;
  memory.Remember(std::move(partial));
  memory.Remember(PlanFor(b, 7, 1000));
  EXPECT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory.in_progress(), 1u);
  EXPECT_EQ(memory.Recall(a, 1000, 0), nullptr) << "no plan chosen for it yet";
  EXPECT_FALSE(memory.Resume(b, 1000).has_value()) << "a chosen plan is recalled, not resumed";
  EXPECT_FALSE(memory.Resume(a, 2000).has_value());  // another limit
  const std::optional<PlanMemory::Plan> resumed = memory.Resume(a, 1000);
  ASSERT_TRUE(resumed.has_value());
  ASSERT_TRUE(resumed->progress.has_value());
  EXPECT_EQ(resumed->progress->next, 2u);
  EXPECT_FALSE(memory.Resume(a, 1000).has_value()) << "taken out: its trials are live";
  EXPECT_EQ(memory.in_progress(), 0u);
  EXPECT_EQ(memory.resumes(), 1u);
  EXPECT_EQ(memory.recalls(), 0u);
}

TEST(PlanMemory, AChosenPlanReplacesTheSameSequencesPlanInProgress) {
  PlanMemory memory(4);
  const SequenceKey a = Sequence({1, 2, 3});
  PlanMemory::Plan partial;
  partial.sequence = a;
  partial.device_limit = 1 << 30;
  partial.progress = CandidateTrials::Progress{};
  memory.Remember(std::move(partial));
  memory.Remember(PlanFor(a, 9));
  EXPECT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory.in_progress(), 0u);
  EXPECT_NE(memory.Recall(a, 1 << 30, 0), nullptr);
}

}  // namespace chameleon::daemon
