// Search quality: the GA with a budget of 10 % of the space against random search with the
// same number of evaluations and against exhaustive enumeration, on 100 instances of 4,096
// plans (2 x 2 wafer, 4 stages × 3 recomputation bits); and on an instance of ~10^12 plans
// against the best of long runs.
#include <gtest/gtest.h>

#include "plan_search.h"
#include "tiny_wafer.h"

namespace chameleon::plan {
namespace {

using testing::TinyModel;
using testing::TinyWafer;

// Instance i: DRAM from 200e6 to 300e6 per die and link bandwidth from 0.2 to 2 GB/s, so the
// best plan moves between "recompute to avoid borrowing" and "borrow to avoid recomputing".
PlanProblem Instance(int i) {
  topology::WaferSpec w = TinyWafer(2, 2, 200'000'000 + 1'000'000ULL * static_cast<unsigned>(i));
  w.d2d_bandwidth = 0.2e9 + 0.018e9 * ((i * 37) % 100);
  return MakeProblem(w, TinyModel(4, 4), {});
}

bool Same(double a, double b) { return std::abs(a - b) <= 1e-12 * std::abs(b); }

TEST(SearchQualityTest, ShouldFindTheExhaustiveOptimumInAtLeast95Of100Instances) {
  int ga_hits = 0, random_hits = 0, greedy_hits = 0;
  for (int i = 0; i < 100; ++i) {
    const PlanProblem p = Instance(i);
    const PlanEvaluator ev(p);
    const SearchResult exact = ExhaustiveRecompute(ev);
    ASSERT_EQ(exact.evaluations, 4096u);
    SearchOptions o;
    o.positions = o.pairings = false;  // the 4,096-plan space: recomputation only
    o.ga.max_evaluations = 409;
    o.ga.max_generations = 1000;
    o.ga.seed = static_cast<std::uint64_t>(i) + 1;
    const SearchResult ga = SearchPlan(ev, o);
    EXPECT_LE(ga.evaluations, 409u);
    const SearchResult random = RandomSearch(ev, o, ga.evaluations);
    EXPECT_EQ(random.evaluations, ga.evaluations);
    const double greedy = ev.Evaluate(GreedyStart(ev), exact.t_ref).fitness;
    ga_hits += Same(ga.evaluation.fitness, exact.evaluation.fitness);
    random_hits += Same(random.evaluation.fitness, exact.evaluation.fitness);
    greedy_hits += Same(greedy, exact.evaluation.fitness);
    EXPECT_GE(ga.evaluation.fitness, exact.evaluation.fitness * (1 - 1e-12));
  }
  RecordProperty("ga_optimum_hits", ga_hits);
  RecordProperty("random_optimum_hits", random_hits);
  RecordProperty("greedy_optimum_hits", greedy_hits);
  std::printf("optimum found in 100 instances: GA %d, random %d, greedy %d\n", ga_hits, random_hits,
              greedy_hits);
  EXPECT_GE(ga_hits, 95);
  EXPECT_GT(ga_hits, random_hits);
}

TEST(SearchQualityTest, ShouldComeWithinOnePercentOfLongRunsOnALargeInstance) {
  // 8 stages on 2 x 4: 2^24 recomputation masks × 8! placements × pairings, > 10^11 plans.
  topology::WaferSpec w = TinyWafer(2, 4, 260'000'000);
  w.d2d_bandwidth = 0.5e9;
  const PlanProblem p = MakeProblem(w, TinyModel(8, 8), {});
  const PlanEvaluator ev(p);
  SearchOptions o;
  o.ga.max_evaluations = 2000;
  o.ga.max_generations = 10'000;
  double best_long = std::numeric_limits<double>::infinity();
  for (std::uint64_t seed = 100; seed < 104; ++seed) {
    SearchOptions longer = o;
    longer.ga.max_evaluations = 20'000;
    longer.ga.seed = seed;
    best_long = std::min(best_long, SearchPlan(ev, longer).evaluation.fitness);
  }
  double worst_gap = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    o.ga.seed = seed;
    const SearchResult r = SearchPlan(ev, o);
    worst_gap = std::max(worst_gap, r.evaluation.fitness / best_long - 1);
  }
  std::printf("large instance: worst gap to the best long run %.4f %%\n", worst_gap * 100);
  EXPECT_LE(worst_gap, 0.01);
}

}  // namespace
}  // namespace chameleon::plan
