#include "chameleon/daemon/sequence_predictor.h"

#include <gtest/gtest.h>

#include <string>

namespace chameleon::daemon {
namespace {

/// One key per letter: 'A' and 'B' are two op sequences of different lengths.
SequenceKey Key(char letter) {
  SequenceKey key;
  for (int i = 0; i < letter; ++i) key.Add(static_cast<std::uint32_t>(letter));
  return key;
}

/// Steps i >= from of `run` whose iteration `ahead` later runs another sequence: the switches.
std::size_t Switches(const std::string& run, std::size_t ahead, std::size_t from) {
  std::size_t n = 0;
  for (std::size_t i = from; i + ahead < run.size(); ++i) n += run[i + ahead] != run[i];
  return n;
}

/// `n` letters A or B from a fixed linear congruential series seeded with `seed`.
std::string RandomRun(std::uint32_t seed, int n) {
  std::string run;
  for (int i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    run += (seed >> 16) & 1 ? 'A' : 'B';
  }
  return run;
}

void ObserveAll(SequencePredictor* predictor, const std::string& letters) {
  for (char c : letters) predictor->Observe(Key(c));
}

/// Guesses given out (Next) that were switches, and of them wrong, over `run` observed in order.
struct Score {
  std::size_t switches = 0, wrong = 0, late_switches = 0, late_wrong = 0;
};
Score Play(const std::string& run, std::size_t ahead, std::size_t late_from) {
  SequencePredictor predictor(ahead);
  Score score;
  for (std::size_t i = 0; i + ahead < run.size(); ++i) {
    predictor.Observe(Key(run[i]));
    const std::optional<SequenceKey> next = predictor.Next();
    if (!next || *next == Key(run[i])) continue;
    const bool wrong = !(*next == Key(run[i + ahead]));
    ++score.switches;
    score.wrong += wrong;
    if (i >= late_from) {
      ++score.late_switches;
      score.late_wrong += wrong;
    }
  }
  return score;
}

TEST(SequencePredictor, NothingBeforeTheHistorySaysIt) {
  SequencePredictor predictor(2);
  EXPECT_FALSE(predictor.Next());
  ObserveAll(&predictor, "AB");
  EXPECT_FALSE(predictor.Next());
  ObserveAll(&predictor, "C");
  EXPECT_FALSE(predictor.Next());  // ABC: no context ran before
}

TEST(SequencePredictor, AConstantLoopPredictsItself) {
  SequencePredictor predictor(2);
  ObserveAll(&predictor, "AAA");
  EXPECT_EQ(predictor.Next(), Key('A'));
  SequencePredictor next_one(1);
  ObserveAll(&next_one, "AA");
  EXPECT_EQ(next_one.Next(), Key('A'));
}

TEST(SequencePredictor, PhasesOfFourPredictTheSwitchTwoAheadFromTheSecondPhaseOn) {
  // AAAABBBB...: after three As of a phase, the iteration two ahead is the next phase's first.
  SequencePredictor predictor(2);
  ObserveAll(&predictor, "AAAABBBBAA");
  // "AA" was followed two later by A once (at the start) and by B twice: not decided.
  EXPECT_FALSE(predictor.Next());
  ObserveAll(&predictor, "A");
  EXPECT_EQ(predictor.Next(), Key('B'));  // AAA -> (A) B, both times before
  ObserveAll(&predictor, "ABB");
  EXPECT_EQ(predictor.Next(), Key('B'));  // AAAABB -> (B) B
  ObserveAll(&predictor, "B");
  EXPECT_EQ(predictor.Next(), Key('A'));  // AAAABBB -> (B) A
  ObserveAll(&predictor, "BA");
  // Due so far: the guesses at the third and fourth A (for the first two Bs) and at the third B.
  EXPECT_EQ(predictor.switches_scored(), 3u);
  EXPECT_EQ(predictor.switch_misses(), 0u);  // all came true
}

TEST(SequencePredictor, EveryStepOfASteadyScheduleIsPredictedAndNoneWrong) {
  // Three phases of unequal lengths: from the second period on every switch is guessed, right.
  const std::string period = "AAAABBCCC";
  std::string run;
  for (int i = 0; i < 6; ++i) run += period;
  const Score score = Play(run, 2, period.size());
  EXPECT_EQ(score.wrong, 0u);
  EXPECT_EQ(score.late_switches, Switches(run, 2, period.size()));
}

TEST(SequencePredictor, ARandomLoopIsSoonNoLongerPredicted) {
  // A fixed pseudo-random A/B series: switch guesses are wrong about half the time, so after
  // the first misses none is given out while the shadow guesses keep missing.
  const std::string run = RandomRun(12345, 400);
  const Score score = Play(run, 2, 0);
  SequencePredictor predictor(2);
  ObserveAll(&predictor, run);
  EXPECT_GT(predictor.switch_misses(), predictor.switches_scored() / 4);  // it is random
  EXPECT_LT(score.switches, run.size() / 10);                             // few are given out ...
  EXPECT_LE(score.wrong, 2 * (score.switches - score.wrong) + 2);  // ... and not mostly wrong
}

TEST(SequencePredictor, AOneOffSequenceCostsAtMostOneWrongSwitch) {
  // X runs once among As: guessing it again after the context that preceded it is wrong once,
  // and then the context's runs disagree.
  const Score score = Play("AAAAXAAAAAAAAAAAAAAAAAAA", 2, 0);
  EXPECT_LE(score.wrong, 1u);
}

TEST(SequencePredictor, TrustComesBackWhenTheGuessesComeTrueAgain) {
  // Random switches first (trust lost), then a schedule: once its shadow guesses come true for
  // kScored switches in a row, its switches are given out again.
  std::string run = RandomRun(99, 120);
  const std::size_t schedule_from = run.size();
  for (int i = 0; i < 10; ++i) run += "CCCDDD";
  const Score score = Play(run, 2, schedule_from + 6 * 6);
  EXPECT_EQ(score.late_wrong, 0u);
  EXPECT_EQ(score.late_switches, Switches(run, 2, schedule_from + 6 * 6));
}

TEST(SequencePredictor, HistoryIsBoundedAndClearForgetsIt) {
  SequencePredictor predictor(1);
  for (std::size_t i = 0; i < 3 * SequencePredictor::kHistory; ++i) predictor.Observe(Key('A'));
  EXPECT_EQ(predictor.size(), SequencePredictor::kHistory);
  ObserveAll(&predictor, "B");
  // The only context ending in B ran never before; a shorter one is B itself.
  EXPECT_EQ(predictor.Next(), std::nullopt);
  predictor.Clear();
  EXPECT_EQ(predictor.size(), 0u);
  EXPECT_FALSE(predictor.Next());
}

}  // namespace
}  // namespace chameleon::daemon
