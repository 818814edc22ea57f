// Node placement: where each GPU's swap volume lives for the next iterations — a peer GPU's spare
// HBM over NVLink, the local NUMA node, or a remote one — decided for all clients of a node at
// once. Greedy WATOS Algorithm 3 (location_aware.h, nearness by seconds per byte) refined by the
// genetic optimiser (genetic.h, operators Op4/Op5), whose fitness is the predicted iteration-time
// penalty combined with GlobalCost by TimeCostFitness. Pure and deterministic for a seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/topology/genetic.h"
#include "chameleon/topology/location_aware.h"
#include "chameleon/topology/topology.h"

namespace chameleon::topology {

/// One client's need: `bytes` of its GPU (`place`) must live elsewhere during an iteration, and
/// moving them out and back may overlap `window_s` of its compute without slowing it.
struct SwapDemand {
  int place = 0;  ///< the GPU's place in the topology
  std::uint64_t bytes = 0;
  double window_s = 0;     ///< compute time the transfers can hide behind, per iteration
  double iteration_s = 0;  ///< the client's iteration time without swapping
};

struct NodePlacementOptions {
  bool genetic = true;  ///< refine the greedy answer; false = greedy only
  GeneticOptions genetic_options{};
};

struct NodePlacement {
  Allocation allocation;           ///< grants: demand index -> helper index, bytes
  double global_cost = 0;          ///< Σ bytes × seconds per byte of the route
  double predicted_penalty_s = 0;  ///< iteration time the transfers add beyond the windows
  double fitness = 0;              ///< what the optimiser minimised
  double greedy_fitness = 0;       ///< the greedy answer's, for reports
  std::size_t evaluations = 0;     ///< fitness evaluations the optimiser spent
};

/// Predicted iteration time of the node (the slowest client's) under `grants`.
double PredictedIterationSeconds(const Topology& topo, const std::vector<SwapDemand>& demands,
                                 const std::vector<Helper>& helpers,
                                 const std::vector<Grant>& grants);

/// Places every demand. A demand no reachable helper can cover yields `allocation.error`.
NodePlacement PlaceNode(const Topology& topo, const std::vector<SwapDemand>& demands,
                        const std::vector<Helper>& helpers, const NodePlacementOptions& options);

}  // namespace chameleon::topology
