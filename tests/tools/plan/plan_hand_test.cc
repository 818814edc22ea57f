// Every number of a 2 x 2 plan worked out by hand (the arithmetic is in the comments), and the
// memory picture of a 3 x 3 one.
#include <gtest/gtest.h>

#include "plan_evaluator.h"
#include "plan_search.h"
#include "tiny_wafer.h"

namespace chameleon::plan {
namespace {

using testing::TinyModel;
using testing::TinyWafer;
using topology::Grant;

// Per layer and micro-batch (T = 1000 tokens, h = 1000, F = 4000, kv = h):
//   forward FLOPs: projections 2·T·4h² = 8e9, core 4·s²·h = 4e9, MLP 2·T·2hF = 16e9 -> 28e9
//   training FLOPs 3 × 28e9 = 84e9; at 1e12 × 0.5 MFU: 0.168 s
//   activations: 7Th + 6Th + (5Th + 4TF) = 7e6 + 6e6 + 21e6 = 34e6 bytes
//   parameters 4h² + 2hF = 12e6 -> × 16 bytes = 192e6 bytes
// 1F1B with 4 stages keeps 4, 3, 2, 1 micro-batches: demand 328e6, 294e6, 260e6, 226e6.
// DRAM 280e6 per die: stage 0 overflows by 48e6, stage 1 by 14e6; stage 2 spares 20e6,
// stage 3 54e6. Snake order puts stages 0..3 on dies 0 (0,0), 1 (1,0), 3 (1,1), 2 (0,1).
class TwoByTwoPlan : public ::testing::Test {
 protected:
  TwoByTwoPlan()
      : problem_(MakeProblem(TinyWafer(2, 2, 280'000'000), TinyModel(4, 4), {})), ev_(problem_) {}
  PlanProblem problem_;
  PlanEvaluator ev_;
};

TEST_F(TwoByTwoPlan, ShouldMatchTheHandComputedMemoryAndPairings) {
  EXPECT_EQ(problem_.slot_dies, (std::vector<std::vector<int>>{{0}, {1}, {3}, {2}}));
  PlanGenome g = ev_.InOrder();
  EXPECT_EQ(ev_.DieDemand(g), (std::vector<double>{328e6, 294e6, 226e6, 260e6}));
  const PlanEvaluation e = ev_.Evaluate(g, 1.0);
  ASSERT_TRUE(e.fits);
  // Senders in die order: die 0 (48e6), die 1 (14e6). Helpers: die 2 (54e6), die 3 (20e6).
  // Die 0: die 2 is 1 hop, die 3 is 2 -> all 48e6 on die 2. Die 1: die 3 is 1 hop -> 14e6.
  EXPECT_EQ(e.grants, (std::vector<Grant>{{0, 0, 48'000'000}, {1, 1, 14'000'000}}));
  EXPECT_DOUBLE_EQ(e.global_cost, (1 * 48e6 + 1 * 14e6) / 1e9);  // 0.062 s
  EXPECT_EQ(e.stages[0].borrowed, 48'000'000u);
  EXPECT_EQ(e.stages[3].lent, 48'000'000u);
  EXPECT_EQ(e.stages[2].lent, 14'000'000u);
  EXPECT_DOUBLE_EQ(e.die_used[2], 226e6 + 48e6);
  EXPECT_DOUBLE_EQ(e.dram_utilisation, (280e6 + 280e6 + 274e6 + 274e6) / (4 * 280e6));
}

TEST_F(TwoByTwoPlan, ShouldMatchTheHandComputedTimesAndLinkLoads) {
  const PlanEvaluation e = ev_.Evaluate(ev_.InOrder(), 1.0);
  // Pipeline messages 2·T·h = 2e6 bytes on 0->1, 1->3, 3->2 and back. Borrowed bytes move
  // twice per micro-batch that owns them: 2·48e6/4 = 24e6 on 0->2, 2·14e6/3 on 1->3.
  const auto& t = problem_.topo;
  EXPECT_DOUBLE_EQ(e.link_bytes[t.LinkIndex(0, 1)], 2e6);
  EXPECT_DOUBLE_EQ(e.link_bytes[t.LinkIndex(0, 2)], 24e6);
  EXPECT_DOUBLE_EQ(e.link_bytes[t.LinkIndex(1, 3)], 2e6 + 28e6 / 3);
  EXPECT_DOUBLE_EQ(e.link_bytes[t.LinkIndex(2, 0)], 0);
  // Stage 1 is slowest: 0.168 s compute + its forward send drains 1->3 (11.33e6 B at 1 GB/s)
  // + its backward send 1->0 (2e6 B), + 2 hops × 100 ns.
  const double t_max = 0.168 + (2e6 + 28e6 / 3) / 1e9 + 2e6 / 1e9 + 2e-7;
  EXPECT_NEAR(e.stages[1].compute_time, 0.168, 1e-12);
  EXPECT_NEAR(e.t_max, t_max, 1e-12);
  // Other stages: 0 sends 2e6 forward (0.170 s + 1 hop), 2 sends 2e6 each way, 3 backward.
  const double others = (0.170 + 1e-7) + (0.172 + 2e-7) + (0.170 + 1e-7);
  // 1F1B: every stage once (fill and drain) plus 3 more micro-batches at t_max.
  const double iteration = others + t_max + 3 * t_max;
  EXPECT_NEAR(e.iteration_time, iteration, 1e-12);
  EXPECT_NEAR(e.tokens_per_s, 4 * 1000 / iteration, 1e-6);
  EXPECT_NEAR(e.link_utilisation[t.LinkIndex(0, 2)], 24e6 / (1e9 * t_max), 1e-12);
  // Fitness: the time per pipeline slot, iteration / (4 + 4 − 1), × (1 + GlobalCost / t_ref).
  EXPECT_NEAR(e.fitness, iteration / 7 * (1 + 0.062 / 1.0), 1e-12);
}

TEST_F(TwoByTwoPlan, ShouldTradeMemoryForTimeWhenStageZeroRecomputesItsMlp) {
  PlanGenome g = ev_.InOrder();
  g.recompute[0] = 1U << static_cast<int>(OpGroup::kMlp);
  ev_.Reallocate(g);
  const PlanEvaluation e = ev_.Evaluate(g, 1.0);
  // MLP keeps 2e6 instead of 21e6: stage 0 holds 192e6 + 4 × 15e6 = 252e6, no overflow;
  // its compute grows by one MLP forward, 16e9 FLOPs: (84 + 16)e9 / 5e11 = 0.2 s.
  EXPECT_DOUBLE_EQ(ev_.DieDemand(g)[0], 252e6);
  EXPECT_NEAR(e.stages[0].compute_time, 0.2, 1e-12);
  // Only die 1 borrows now; die 0 (1 hop, helper 0, 28e6 spare) and die 3 (1 hop, helper 2)
  // tie, so the lower helper index, die 0, lends.
  EXPECT_EQ(e.grants, (std::vector<Grant>{{0, 0, 14'000'000}}));
}

TEST_F(TwoByTwoPlan, ShouldReportAShortfallWhenTheWaferIsTooSmall) {
  const PlanProblem small = MakeProblem(TinyWafer(2, 2, 100'000'000), TinyModel(4, 4), {});
  const PlanEvaluator ev(small);
  const PlanGenome g = GreedyStart(ev);
  const PlanEvaluation e = ev.Evaluate(g, 1.0);
  // Even fully recomputed, each stage needs 192e6 + n × 6e6 > 100e6: nothing fits.
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(g.recompute, (std::vector<unsigned>(4, 7)));
  // Demand 192e6 × 4 + 6e6 × (4 + 3 + 2 + 1) = 828e6 against 400e6 of DRAM.
  EXPECT_EQ(e.shortfall, 428'000'000u);
  EXPECT_FALSE(e.shortfall_reason.empty());
}

// 3 x 3, nine stages of one layer, 9 micro-batches: stage i keeps 9 − i micro-batches,
// demand 192e6 + (9 − i) × 34e6 = 498, 464, 430, 396, 362, 328, 294, 260, 226 (e6). With
// 300e6 per die stages 0-5 overflow by 198, 164, 130, 96, 62, 28 (678e6 in all) and stages
// 6-8 spare 6, 40, 74 (120e6): short by 558e6 (= 3258e6 − 2700e6) without recomputation.
// Snake order: stages 0..8 on dies 0, 1, 2, 5, 4, 3, 6, 7, 8; Senders are taken in die order.
TEST(ThreeByThreePlan, ShouldMatchTheHandComputedDemandAndShortfall) {
  const PlanProblem p = MakeProblem(TinyWafer(3, 3, 300'000'000), TinyModel(9, 9), {});
  EXPECT_EQ(p.slot_dies,
            (std::vector<std::vector<int>>{{0}, {1}, {2}, {5}, {4}, {3}, {6}, {7}, {8}}));
  const PlanEvaluator ev(p);
  const PlanEvaluation e = ev.Evaluate(ev.InOrder(), 1.0);
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(e.shortfall, 558'000'000u);
  EXPECT_EQ(e.senders.size(), 6u);  // stages 0-5
  EXPECT_EQ(e.helpers.size(), 3u);  // stages 6-8 on dies 6, 7, 8
  // Sender die 0 (stage 0, 198e6) is served first: die 6 (0,2) is 2 hops, 7 is 3, 8 is 4:
  // takes 6e6, 40e6, 74e6 = everything (120e6); the other senders get nothing.
  EXPECT_EQ(e.grants,
            (std::vector<Grant>{{0, 0, 6'000'000}, {0, 1, 40'000'000}, {0, 2, 74'000'000}}));
  EXPECT_DOUBLE_EQ(e.global_cost, (2 * 6e6 + 3 * 40e6 + 4 * 74e6) / 1e9);
  // With full recomputation each stage keeps 6e6 per micro-batch: 1728e6 + 45 × 6e6 fits.
  const PlanGenome greedy = GreedyStart(ev);
  EXPECT_TRUE(ev.Evaluate(greedy, 1.0).fits);
}

}  // namespace
}  // namespace chameleon::plan
