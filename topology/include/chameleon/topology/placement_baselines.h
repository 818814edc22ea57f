// The searches PlaceNode's optimiser is judged against (tests, bench/placement_bench): exhaustive
// enumeration of the discretised placement space, and random search with the same number of
// fitness evaluations. Discretised: every demand's bytes and every helper's spare are split in
// `quantum`-byte units and a placement says how many units of each demand each helper holds.
// Pure functions, deterministic for a seed; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "chameleon/topology/node_placement.h"

namespace chameleon::topology {

/// Calls `visit` with every placement of the discretised space that covers every demand
/// (normalised grants) and returns how many there were. Bytes below a whole quantum are
/// ignored, so callers give multiples of `quantum` (> 0). Stops early, returning `limit`, once
/// `limit` placements (> 0) have been visited, so a caller can bound an unexpectedly large space.
std::uint64_t ForEachPlacement(const std::vector<SwapDemand>& demands,
                               const std::vector<Helper>& helpers, std::uint64_t quantum,
                               const std::function<void(const std::vector<Grant>&)>& visit,
                               std::uint64_t limit = 0);

struct BaselineResult {
  std::vector<Grant> best;
  double best_fitness = 0;
  std::uint64_t evaluations = 0;  ///< distinct placements evaluated
};

/// The optimum of PlacementFitness(…, t_ref) over the whole discretised space.
BaselineResult ExhaustiveOptimum(const Topology& topo, const std::vector<SwapDemand>& demands,
                                 const std::vector<Helper>& helpers, std::uint64_t quantum,
                                 double t_ref);

/// Random search: draws placements (each unit of each demand, in turn, to a uniformly chosen
/// helper that still has a free unit) until `evaluations` distinct ones are evaluated, or 100
/// times as many draws were made (a space smaller than the budget). Returns the best.
BaselineResult RandomSearch(const Topology& topo, const std::vector<SwapDemand>& demands,
                            const std::vector<Helper>& helpers, std::uint64_t quantum, double t_ref,
                            std::uint64_t evaluations, std::uint64_t seed);

}  // namespace chameleon::topology
