// Invariants every plan must keep, checked on all presets × public configurations, and the
// router's paths; plus determinism for a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "mesh_routing.h"
#include "plan_search.h"

namespace chameleon::plan {
namespace {

void ExpectInvariants(const PlanProblem& p, const PlanGenome& g, const PlanEvaluation& e) {
  std::vector<int> slots = g.slot;
  std::sort(slots.begin(), slots.end());
  std::vector<int> expected(p.stages);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(slots, expected) << "each stage placed exactly once";
  for (double used : e.die_used) {
    EXPECT_LE(used, static_cast<double>(p.wafer.dram_per_die)) << "DRAM of a die exceeded";
  }
  EXPECT_EQ(topology::CheckAllocation(e.senders, e.helpers, e.grants, e.fits), "");
  if (e.fits) {
    EXPECT_EQ(e.shortfall, 0u);
  }
  EXPECT_GT(e.t_max, 0);
  EXPECT_GE(e.global_cost, 0);
  for (double u : e.link_utilisation) EXPECT_GE(u, 0);
}

class EveryPreset : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EveryPreset, ShouldKeepThePlanInvariantsAndBeatOrMatchTheBaseline) {
  const auto& [model, config] = GetParam();
  const PlanProblem p = MakeProblem(*topology::WaferPreset(config), *ModelPreset(model), {});
  const PlanEvaluator ev(p);
  SearchOptions o;
  o.ga.max_generations = 8;
  o.ga.seed = 3;
  const SearchResult r = SearchPlan(ev, o);
  ExpectInvariants(p, r.best, r.evaluation);
  const PlanGenome greedy = GreedyStart(ev);
  EXPECT_LE(r.evaluation.fitness, ev.Evaluate(greedy, r.t_ref).fitness);
  const PlanGenome baseline = MegatronBaseline(ev);
  ExpectInvariants(p, baseline, ev.Evaluate(baseline, r.t_ref));
}

INSTANTIATE_TEST_SUITE_P(PresetsByConfig, EveryPreset,
                         ::testing::Combine(::testing::Values("llama2-30b", "llama3-70b",
                                                              "gpt-175b", "gshard-137b"),
                                            ::testing::Values("config1", "config3", "config4")));

TEST(PlanFitTest, ShouldAnswerGpt175bOnConfig1WithAShortfallNotAFailure) {
  const PlanProblem p =
      MakeProblem(*topology::WaferPreset("config1"), *ModelPreset("gpt-175b"), {});
  // 16 bytes per parameter alone exceed 56 × 48 GB.
  EXPECT_GT(ModelParams(p.model) * 16, 56 * 48e9);
  const PlanEvaluator ev(p);
  SearchOptions o;
  o.ga.max_generations = 2;
  const SearchResult r = SearchPlan(ev, o);
  EXPECT_FALSE(r.evaluation.fits);
  EXPECT_GE(static_cast<double>(r.evaluation.shortfall), ModelParams(p.model) * 16 - 56 * 48e9);
}

TEST(PlanProblemTest, ShouldSplitLayersSoThatNoStageHoldsMoreThanItMust) {
  const auto c1 = *topology::WaferPreset("config1");
  // 80 layers on 56 dies: 8 stages of 10 layers on 7 dies (8 × 10 = 80 layer slots) beats
  // 56 stages of up to 2 (112 slots) and 28 of up to 3 (84).
  const PlanProblem p = MakeProblem(c1, *ModelPreset("llama3-70b"), {});
  EXPECT_EQ(p.stages, 8);
  EXPECT_EQ(p.dies_per_stage, 7);
  for (const auto& layers : p.stage_layers) EXPECT_EQ(layers.size(), 10u);
  PlanOptions forced;
  forced.dies_per_stage = 1;
  const PlanProblem deep = MakeProblem(c1, *ModelPreset("llama3-70b"), forced);
  EXPECT_EQ(deep.stages, 56);
  EXPECT_EQ(deep.stage_layers.front().size(), 1u);  // the 24 extra layers go to the last stages
  EXPECT_EQ(deep.stage_layers.back().size(), 2u);
  forced.dies_per_stage = 5;
  EXPECT_THROW(MakeProblem(c1, *ModelPreset("llama3-70b"), forced), std::invalid_argument);
}

TEST(PlanSearchTest, ShouldBeDeterministicForASeed) {
  const PlanProblem p =
      MakeProblem(*topology::WaferPreset("config1"), *ModelPreset("llama3-70b"), {});
  const PlanEvaluator ev(p);
  SearchOptions o;
  o.ga.max_generations = 6;
  o.ga.seed = 11;
  const SearchResult a = SearchPlan(ev, o);
  const SearchResult b = SearchPlan(ev, o);
  EXPECT_EQ(GenomeKey(a.best), GenomeKey(b.best));
  EXPECT_EQ(a.evaluation.fitness, b.evaluation.fitness);
  EXPECT_EQ(a.evaluations, b.evaluations);
}

TEST(MeshRouterTest, ShouldReturnConnectedMinimalPathsThatAvoidALoadedLink) {
  const topology::WaferSpec w{"t", 7, 8, 1, 1.0, 1.0};
  const topology::Topology t = topology::BuildWafer(w);
  MeshRouter router(w, t);
  topology::Rng rng(5);
  for (int i = 0; i < 200; ++i) {
    const int a = rng.Index(56), b = rng.Index(56);
    const std::vector<int> links = router.RouteAvoidingLoad(a, b, 1.0 + rng.Index(5));
    ASSERT_EQ(static_cast<int>(links.size()), topology::ManhattanHops(w, a, b));
    int at = a;
    for (int l : links) {
      ASSERT_EQ(t.links()[l].from, at) << "route must be connected";
      at = t.links()[l].to;
    }
    EXPECT_EQ(at, b);
  }
  // From (0,0) to (1,1): x-first goes over (1,0); load that link and the route turns to y.
  MeshRouter fresh(w, t);
  const int x_first = t.LinkIndex(topology::DieIndex(w, 0, 0), topology::DieIndex(w, 1, 0));
  EXPECT_EQ(fresh.RouteAvoidingLoad(0, topology::DieIndex(w, 1, 1), 1).front(), x_first);
  EXPECT_NE(fresh.RouteAvoidingLoad(0, topology::DieIndex(w, 1, 1), 1).front(), x_first);
}

}  // namespace
}  // namespace chameleon::plan
