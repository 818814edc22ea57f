// Scores one plan (stage positions, recomputation per stage, DRAM pairings) with the cost model:
// memory per die, Senders and Helpers, routes and link loads, per-stage time, t_max and
// GlobalCost. Const methods only; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/topology/location_aware.h"
#include "plan_problem.h"

namespace chameleon::plan {

/// What the search changes.
struct PlanGenome {
  std::vector<int> slot;                ///< stage -> slot (a permutation)
  std::vector<unsigned> recompute;      ///< stage -> bit mask over OpGroup
  std::vector<topology::Grant> grants;  ///< pairings; recomputed by Alg. 3 when they do not fit
};

struct StageReport {
  int slot = 0;
  int first_layer = 0;
  int layers = 0;
  unsigned recompute = 0;
  int in_flight = 0;  ///< micro-batches whose activations the stage keeps (1F1B)
  double param_bytes = 0;
  double activation_bytes = 0;  ///< all in-flight micro-batches
  std::uint64_t borrowed = 0;   ///< bytes its dies keep on other dies
  std::uint64_t lent = 0;       ///< bytes of others its dies keep
  double compute_time = 0;      ///< per micro-batch, forward + backward + recomputation
  double comm_time = 0;         ///< tensor-parallel and pipeline sends per micro-batch
};

struct PlanEvaluation {
  bool fits = false;
  std::uint64_t shortfall = 0;  ///< bytes no die could take
  std::string shortfall_reason;
  double t_max = 0;           ///< slowest stage, per micro-batch
  double iteration_time = 0;  ///< 1F1B: (micro-batches + stages − 1) × t_max
  double tokens_per_s = 0;
  double global_cost = 0;       ///< Σ hops × bytes / link bandwidth, seconds
  double fitness = 0;           ///< TimeCostFitness(iteration / (m + p − 1), GlobalCost)
  double dram_utilisation = 0;  ///< bytes held / bytes on the wafer
  double peak_link_utilisation = 0;
  std::vector<StageReport> stages;
  std::vector<double> die_used;          ///< bytes held on each die (own + lent)
  std::vector<double> link_bytes;        ///< per directed link, per micro-batch cycle
  std::vector<double> link_utilisation;  ///< link_bytes / (bandwidth × t_max)
  std::vector<topology::Sender> senders;
  std::vector<topology::Helper> helpers;
  std::vector<topology::Grant> grants;
};

class PlanEvaluator {
 public:
  explicit PlanEvaluator(const PlanProblem& problem) : p_(problem) {}

  const PlanProblem& problem() const { return p_; }
  /// Every stage in its own slot, in order; nothing recomputed; pairings empty.
  PlanGenome InOrder() const;
  /// Bytes each die must hold for this placement and recomputation.
  std::vector<double> DieDemand(const PlanGenome& g) const;
  /// Senders and Helpers of a die demand, both in die order.
  void SendersAndHelpers(const std::vector<double>& demand, std::vector<topology::Sender>& senders,
                         std::vector<topology::Helper>& helpers) const;
  /// Replaces the pairings with Alg. 3's for the genome's placement and recomputation.
  void Reallocate(PlanGenome& g) const;
  /// Full evaluation. Invalid pairings are replaced by Alg. 3's. `t_ref` scales GlobalCost in
  /// the fitness (TimeCostFitness); a plan that does not fit scores above every plan that does.
  PlanEvaluation Evaluate(const PlanGenome& g, double t_ref) const;

 private:
  double StageActivation(int stage, unsigned mask) const;
  int InFlight(int stage) const;
  void ComputeTimes(const PlanGenome& g, PlanEvaluation& e) const;
  void RouteTraffic(const PlanGenome& g, PlanEvaluation& e) const;
  void Summarise(PlanEvaluation& e, double t_ref) const;

  const PlanProblem& p_;
};

}  // namespace chameleon::plan
