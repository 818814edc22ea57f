// Node placement: where each GPU's swap volume lives for the next iterations — a peer GPU's spare
// HBM over NVLink, the local NUMA node, or a remote one — decided for all clients of a node at
// once. Greedy WATOS Algorithm 3 (location_aware.h, nearness by seconds per byte) refined by the
// genetic optimiser (genetic.h, operators Op4/Op5), whose fitness is the predicted iteration-time
// penalty combined with GlobalCost by TimeCostFitness. Pure functions, deterministic for a seed;
// thread-safe (each call owns its search).
//
// The fitness rule (PlacementFitness): f = TimeCostFitness(max(t, 1 ns), GlobalCost, t_ref)
//   = t × (1 + GlobalCost / t_ref), with t the node's predicted iteration time and t_ref the
// greedy answer's t (floored at 1 ns). A zero GlobalCost (nothing borrowed) leaves f = t, so such
// plans are still ordered by time; t is at least the slowest client's iteration_s, and the 1 ns
// floor keeps the cost term alive when no iteration time is known and every transfer hides.
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
  double iteration_s = 0;  ///< the client's iteration time without swapping (0 = unknown)
};

struct NodePlacementOptions {
  bool genetic = true;  ///< refine the greedy answer; false = greedy only
  GeneticOptions genetic_options{};
  /// Op4 moves bytes in multiples of this (its remainder when less is left), so the search
  /// space is countable: each demand's bytes / quantum units spread over the helpers. 0 = Op4
  /// moves a whole grant, or what fits in the target's free room.
  std::uint64_t quantum = 0;
};

struct NodePlacement {
  Allocation allocation;             ///< grants: demand index -> helper index, bytes
  double global_cost = 0;            ///< Σ bytes × seconds per byte of the route
  double predicted_iteration_s = 0;  ///< the node's (slowest client's) predicted iteration time
  double predicted_penalty_s = 0;    ///< predicted_iteration_s − the slowest iteration_s
  double fitness = 0;                ///< what the optimiser minimised (PlacementFitness)
  double greedy_fitness = 0;         ///< the greedy answer's, for reports
  std::size_t evaluations = 0;       ///< fitness evaluations the optimiser spent
};

/// Predicted iteration time of the node (the slowest client's) under `grants`.
///
/// Model: every client swaps out during its forward pass and back in during its backward pass,
/// all clients at once (a node trains in lock step). In each phase every directed link drains
/// the bytes of all grants whose route crosses it at its bandwidth, so two GPUs behind one
/// inter-socket link, or one peer lending to two, share that link. A client's phase lasts until
/// the busiest link on its routes has drained (plus the longest route latency); its transfer
/// time is out + in, minus the compute window it overlaps, clamped at 0, added to its
/// iteration_s. A grant over an unreachable route gives infinity.
double PredictedIterationSeconds(const Topology& topo, const std::vector<SwapDemand>& demands,
                                 const std::vector<Helper>& helpers,
                                 const std::vector<Grant>& grants);

/// The optimiser's objective for `grants` (the rule in the file comment); lower is better.
double PlacementFitness(const Topology& topo, const std::vector<SwapDemand>& demands,
                        const std::vector<Helper>& helpers, const std::vector<Grant>& grants,
                        double t_ref);

/// Places every demand. Invalid input (a place outside the topology, a negative or non-finite
/// time) or a demand no reachable helper can cover yields `allocation.error`, one line naming
/// the demand, its GPU and the bytes; the grants then cover what they can.
NodePlacement PlaceNode(const Topology& topo, const std::vector<SwapDemand>& demands,
                        const std::vector<Helper>& helpers, const NodePlacementOptions& options);

}  // namespace chameleon::topology
