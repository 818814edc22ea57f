// The searches over plans: the greedy start (Alg. 3 on the in-order placement, recomputation
// added where memory does not fit), WATOS's GA with Op1-Op5, the Megatron-style in-order
// baseline, and, for judging the GA, random search and exhaustive enumeration.
// Free functions over a const PlanEvaluator; thread-safe.
#pragma once

#include <string>

#include "chameleon/topology/genetic.h"
#include "plan_evaluator.h"

namespace chameleon::plan {

struct SearchOptions {
  topology::GeneticOptions ga;  ///< population, elite fraction, budget, seed
  bool positions = true;        ///< Op3
  bool recompute = true;        ///< Op1, Op2 (and recomputation crossover)
  bool pairings = true;         ///< Op4, Op5
};

struct SearchResult {
  PlanGenome best;
  PlanEvaluation evaluation;
  std::size_t evaluations = 0;  ///< distinct plans scored
  int generations = 0;
  double seconds = 0;  ///< wall time of the search
  double t_ref = 0;    ///< GlobalCost scale of the fitness: the greedy plan's t_max
};

/// Canonical bytes of a genome; equal keys mean equal plans.
std::string GenomeKey(const PlanGenome& g);
/// In-order placement; while Alg. 3 leaves bytes uncovered, the stage with the largest
/// per-die demand recomputes one more group (MLP first: it saves the most per FLOP).
PlanGenome GreedyStart(const PlanEvaluator& ev);
/// Megatron-style: stages in order; no recomputation if every die holds its stage, otherwise
/// full recomputation everywhere (Megatron's usual answer); what still overflows goes first-fit
/// to dies in index order, ignoring distance (no location-aware allocation).
PlanGenome MegatronBaseline(const PlanEvaluator& ev);
/// The GA from GreedyStart; never worse than it.
SearchResult SearchPlan(const PlanEvaluator& ev, const SearchOptions& options);
/// Uniformly random plans over the same choices, `budget` distinct evaluations.
SearchResult RandomSearch(const PlanEvaluator& ev, const SearchOptions& options,
                          std::size_t budget);
/// Every recomputation mask with the in-order placement and Alg. 3 pairings (2^(3·stages)
/// plans). Throws std::invalid_argument above 2^24 plans.
SearchResult ExhaustiveRecompute(const PlanEvaluator& ev);

}  // namespace chameleon::plan
