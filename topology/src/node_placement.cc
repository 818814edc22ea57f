// PlaceNode: validation, the greedy answer (Alg. 3 by seconds per byte) and its GA refinement.
#include "chameleon/topology/node_placement.h"

#include <algorithm>
#include <cmath>

namespace chameleon::topology {
namespace {

// The floor on t and t_ref (node_placement.h): far below any real iteration, so it only
// matters when no iteration time is known and every transfer hides.
constexpr double kTimeFloorS = 1e-9;

std::string Bytes(std::uint64_t b) { return std::to_string(b) + " bytes"; }

std::string DemandName(const Topology& topo, const std::vector<SwapDemand>& demands,
                       std::size_t d) {
  return "demand " + std::to_string(d) + " (" + topo.place(demands[d].place).name + ")";
}

bool ValidTime(double s) { return std::isfinite(s) && s >= 0; }

// First problem with the input, or "". Inputs come from clients' reports via the daemon, so
// every index and time is checked before anything reads the topology with it.
std::string Validate(const Topology& topo, const std::vector<SwapDemand>& demands,
                     const std::vector<Helper>& helpers) {
  for (std::size_t d = 0; d < demands.size(); ++d) {
    const SwapDemand& s = demands[d];
    if (s.place < 0 || s.place >= topo.place_count()) {
      return "demand " + std::to_string(d) + " names place " + std::to_string(s.place) +
             ", outside the topology's " + std::to_string(topo.place_count()) + " places";
    }
    if (!ValidTime(s.window_s) || !ValidTime(s.iteration_s)) {
      return DemandName(topo, demands, d) +
             ": window_s and iteration_s must be finite and not negative";
    }
  }
  for (std::size_t h = 0; h < helpers.size(); ++h) {
    if (helpers[h].place < 0 || helpers[h].place >= topo.place_count()) {
      return "helper " + std::to_string(h) + " names place " + std::to_string(helpers[h].place) +
             ", outside the topology's " + std::to_string(topo.place_count()) + " places";
    }
  }
  return {};
}

std::vector<Sender> Senders(const std::vector<SwapDemand>& demands) {
  std::vector<Sender> senders;
  senders.reserve(demands.size());
  for (const SwapDemand& d : demands) senders.push_back(Sender{d.place, d.bytes});
  return senders;
}

// The shortfall line: the first demand left short, with its and the node's byte counts.
std::string Shortfall(const Topology& topo, const std::vector<SwapDemand>& demands,
                      const std::vector<Helper>& helpers, const std::vector<Grant>& grants) {
  std::vector<std::uint64_t> got(demands.size(), 0);
  for (const Grant& g : grants) got[g.sender] += g.bytes;
  std::uint64_t demand = 0;
  std::uint64_t spare = 0;
  for (const SwapDemand& d : demands) demand += d.bytes;
  for (const Helper& h : helpers) spare += h.bytes;
  for (std::size_t d = 0; d < demands.size(); ++d) {
    if (got[d] < demands[d].bytes) {
      return DemandName(topo, demands, d) + ": " + Bytes(demands[d].bytes - got[d]) + " of " +
             Bytes(demands[d].bytes) + " found no reachable helper with room; total demand " +
             Bytes(demand) + ", total spare " + Bytes(spare);
    }
  }
  return {};
}

std::string GrantsKey(const std::vector<Grant>& grants) {
  std::string key;
  for (const Grant& g : grants) {
    key += std::to_string(g.sender) + ':' + std::to_string(g.helper) + ':' +
           std::to_string(g.bytes) + ';';
  }
  return key;
}

// Fills the reported figures of `out` for its grants.
void Describe(const Topology& topo, const std::vector<SwapDemand>& demands,
              const std::vector<Helper>& helpers, double t_ref, NodePlacement& out) {
  const std::vector<Grant>& grants = out.allocation.grants;
  double slowest = 0;
  for (const SwapDemand& d : demands) slowest = std::max(slowest, d.iteration_s);
  out.global_cost = GlobalCost(topo, Senders(demands), helpers, grants);
  out.predicted_iteration_s = PredictedIterationSeconds(topo, demands, helpers, grants);
  out.predicted_penalty_s = out.predicted_iteration_s - slowest;
  out.fitness = PlacementFitness(topo, demands, helpers, grants, t_ref);
}

}  // namespace

double PlacementFitness(const Topology& topo, const std::vector<SwapDemand>& demands,
                        const std::vector<Helper>& helpers, const std::vector<Grant>& grants,
                        double t_ref) {
  const double t = PredictedIterationSeconds(topo, demands, helpers, grants);
  const double cost = GlobalCost(topo, Senders(demands), helpers, grants);
  return TimeCostFitness(std::max(t, kTimeFloorS), cost, std::max(t_ref, kTimeFloorS));
}

NodePlacement PlaceNode(const Topology& topo, const std::vector<SwapDemand>& demands,
                        const std::vector<Helper>& helpers, const NodePlacementOptions& options) {
  NodePlacement out;
  out.allocation.error = Validate(topo, demands, helpers);
  if (!out.allocation.ok()) return out;
  out.allocation = AllocateNearest(topo, Senders(demands), helpers, Nearness::kSecondsPerByte);
  if (!out.allocation.ok()) {
    out.allocation.error = Shortfall(topo, demands, helpers, out.allocation.grants);
    return out;
  }
  const double t_ref = PredictedIterationSeconds(topo, demands, helpers, out.allocation.grants);
  Describe(topo, demands, helpers, t_ref, out);
  out.greedy_fitness = out.fitness;
  out.evaluations = 1;
  if (!options.genetic || out.allocation.grants.empty()) return out;

  GeneticProblem<std::vector<Grant>> problem;
  problem.fitness = [&](const std::vector<Grant>& g) {
    return PlacementFitness(topo, demands, helpers, g, t_ref);
  };
  problem.key = GrantsKey;
  const std::uint64_t quantum = options.quantum;
  problem.operators.push_back([&helpers, quantum](std::vector<Grant>& g, Rng& rng) {
    return MutatePairing(g, helpers, rng, quantum);
  });
  problem.operators.push_back(
      [](std::vector<Grant>& g, Rng& rng) { return ExchangePairings(g, rng); });
  const auto result = RunGenetic(out.allocation.grants, problem, options.genetic_options);
  out.allocation.grants = result.best;
  out.evaluations = result.evaluations;
  Describe(topo, demands, helpers, t_ref, out);
  return out;
}

}  // namespace chameleon::topology
