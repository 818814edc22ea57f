#include "plan_evaluator.h"

#include <algorithm>
#include <numeric>

#include "chameleon/topology/genetic.h"
#include "mesh_routing.h"

namespace chameleon::plan {
namespace {

using topology::Grant;

// A plan that does not fit must lose to every plan that does, and among plans that do not fit
// the smaller shortfall must win: this offset exceeds any feasible fitness by far.
constexpr double kInfeasibleScale = 1e6;

}  // namespace

PlanGenome PlanEvaluator::InOrder() const {
  PlanGenome g;
  g.slot.resize(p_.stages);
  std::iota(g.slot.begin(), g.slot.end(), 0);
  g.recompute.assign(p_.stages, 0);
  return g;
}

int PlanEvaluator::InFlight(int stage) const {
  return std::min(p_.stages - stage, p_.micro_batches);
}

double PlanEvaluator::StageActivation(int stage, unsigned mask) const {
  double bytes = 0;
  for (const LayerCost& c : p_.stage_layers[stage]) bytes += KeptActivation(c, mask);
  return bytes;
}

std::vector<double> PlanEvaluator::DieDemand(const PlanGenome& g) const {
  std::vector<double> demand(p_.wafer.dies(), 0.0);
  for (int s = 0; s < p_.stages; ++s) {
    const double total = p_.stage_param_bytes[s] + InFlight(s) * StageActivation(s, g.recompute[s]);
    for (int die : p_.slot_dies[g.slot[s]]) demand[die] = total / p_.dies_per_stage;
  }
  return demand;
}

void PlanEvaluator::SendersAndHelpers(const std::vector<double>& demand,
                                      std::vector<topology::Sender>& senders,
                                      std::vector<topology::Helper>& helpers) const {
  const auto cap = static_cast<double>(p_.wafer.dram_per_die);
  for (int die = 0; die < p_.wafer.dies(); ++die) {
    if (demand[die] > cap) {
      senders.push_back({die, static_cast<std::uint64_t>(demand[die] - cap)});
    } else if (demand[die] < cap) {
      helpers.push_back({die, static_cast<std::uint64_t>(cap - demand[die])});
    }
  }
}

void PlanEvaluator::Reallocate(PlanGenome& g) const {
  std::vector<topology::Sender> senders;
  std::vector<topology::Helper> helpers;
  SendersAndHelpers(DieDemand(g), senders, helpers);
  g.grants = topology::AllocateNearest(p_.topo, senders, helpers).grants;
}

PlanEvaluation PlanEvaluator::Evaluate(const PlanGenome& g, double t_ref) const {
  PlanEvaluation e;
  const std::vector<double> demand = DieDemand(g);
  SendersAndHelpers(demand, e.senders, e.helpers);
  if (topology::CheckAllocation(e.senders, e.helpers, g.grants, true).empty()) {
    e.grants = g.grants;
  } else {
    topology::Allocation a = topology::AllocateNearest(p_.topo, e.senders, e.helpers);
    e.grants = std::move(a.grants);
    e.shortfall = a.uncovered;
    e.shortfall_reason = a.error;
  }
  e.fits = e.shortfall == 0;
  e.global_cost = topology::GlobalCost(p_.topo, e.senders, e.helpers, e.grants);
  const auto cap = static_cast<double>(p_.wafer.dram_per_die);
  e.die_used.resize(demand.size());
  for (std::size_t d = 0; d < demand.size(); ++d) e.die_used[d] = std::min(demand[d], cap);
  std::vector<int> stage_of_die(demand.size(), -1);
  for (int s = 0; s < p_.stages; ++s) {
    for (int die : p_.slot_dies[g.slot[s]]) stage_of_die[die] = s;
  }
  e.stages.resize(p_.stages);
  for (const Grant& gr : e.grants) {
    e.die_used[e.helpers[gr.helper].place] += static_cast<double>(gr.bytes);
    e.stages[stage_of_die[e.senders[gr.sender].place]].borrowed += gr.bytes;
    e.stages[stage_of_die[e.helpers[gr.helper].place]].lent += gr.bytes;
  }
  ComputeTimes(g, e);
  RouteTraffic(g, e);
  Summarise(e, t_ref);
  return e;
}

void PlanEvaluator::ComputeTimes(const PlanGenome& g, PlanEvaluation& e) const {
  const double rate = p_.dies_per_stage * p_.wafer.flops_per_die * p_.options.mfu;
  for (int s = 0; s < p_.stages; ++s) {
    StageReport& r = e.stages[s];
    r.slot = g.slot[s];
    r.first_layer = p_.first_layer[s];
    r.layers = static_cast<int>(p_.stage_layers[s].size());
    r.recompute = g.recompute[s];
    r.in_flight = InFlight(s);
    r.param_bytes = p_.stage_param_bytes[s];
    r.activation_bytes = r.in_flight * StageActivation(s, g.recompute[s]);
    double flops = 0;
    for (const LayerCost& c : p_.stage_layers[s]) flops += TrainingFlops(c, g.recompute[s]);
    r.compute_time = flops / rate;
  }
}

// Loads per micro-batch cycle: the activation to the next stage and the gradient to the
// previous one (message_bytes each), tensor-parallel all-reduces inside a slot (four per layer,
// ring volume 2(k−1)/k of the message on each link direction of the chain), and the borrowed
// bytes of each grant written once and read once per micro-batch that owns them.
void PlanEvaluator::RouteTraffic(const PlanGenome& g, PlanEvaluation& e) const {
  MeshRouter router(p_.wafer, p_.topo);
  const int k = p_.dies_per_stage;
  const double bw = p_.wafer.d2d_bandwidth;
  std::vector<std::vector<int>> fwd(p_.stages), bwd(p_.stages);
  const auto endpoints = [&](int from_stage, int to_stage) {
    std::pair<int, int> best{-1, -1};
    int hops = topology::kUnreachable;
    for (int a : p_.slot_dies[g.slot[from_stage]]) {
      for (int b : p_.slot_dies[g.slot[to_stage]]) {
        if (p_.topo.Hops(a, b) < hops) hops = p_.topo.Hops(a, b), best = {a, b};
      }
    }
    return best;
  };
  for (int s = 0; s + 1 < p_.stages; ++s) {
    const auto [a, b] = endpoints(s, s + 1);
    fwd[s] = router.RouteAvoidingLoad(a, b, p_.message_bytes);
    bwd[s + 1] = router.RouteAvoidingLoad(b, a, p_.message_bytes);
  }
  for (int s = 0; s < p_.stages && k > 1; ++s) {
    const double tp = 4.0 * e.stages[s].layers * 2.0 * (k - 1) / k * p_.message_bytes;
    const std::vector<int>& dies = p_.slot_dies[g.slot[s]];
    for (int i = 0; i + 1 < k; ++i) {
      router.AddLoad(
          {p_.topo.LinkIndex(dies[i], dies[i + 1]), p_.topo.LinkIndex(dies[i + 1], dies[i])}, tp);
    }
    e.stages[s].comm_time += tp / bw;
  }
  for (const Grant& gr : e.grants) {
    const int from = e.senders[gr.sender].place;
    const int owner = [&] {
      for (int s = 0; s < p_.stages; ++s) {
        for (int die : p_.slot_dies[g.slot[s]]) {
          if (die == from) return s;
        }
      }
      return 0;
    }();
    router.RouteAvoidingLoad(from, e.helpers[gr.helper].place,
                             2.0 * static_cast<double>(gr.bytes) / InFlight(owner));
  }
  e.link_bytes = router.load();
  // A send finishes when the busiest link on its route has drained its cycle's load.
  const auto send_time = [&](const std::vector<int>& links) {
    double worst = 0;
    for (int l : links) worst = std::max(worst, e.link_bytes[l]);
    return worst / bw + static_cast<double>(links.size()) * p_.wafer.d2d_latency;
  };
  for (int s = 0; s < p_.stages; ++s) {
    e.stages[s].comm_time += send_time(fwd[s]) + send_time(bwd[s]);
  }
}

void PlanEvaluator::Summarise(PlanEvaluation& e, double t_ref) const {
  double sum = 0;
  for (const StageReport& r : e.stages) {
    e.t_max = std::max(e.t_max, r.compute_time + r.comm_time);
    sum += r.compute_time + r.comm_time;
  }
  // 1F1B: the first micro-batch passes every stage once (fill and drain), the other m − 1 are
  // paced by the slowest stage.
  e.iteration_time = sum + (p_.micro_batches - 1) * e.t_max;
  e.tokens_per_s = static_cast<double>(p_.micro_batches) * p_.model.micro_batch * p_.model.seq /
                   e.iteration_time;
  e.link_utilisation.resize(e.link_bytes.size());
  for (std::size_t l = 0; l < e.link_bytes.size(); ++l) {
    e.link_utilisation[l] = e.link_bytes[l] / (p_.topo.links()[l].bandwidth * e.t_max);
    e.peak_link_utilisation = std::max(e.peak_link_utilisation, e.link_utilisation[l]);
  }
  const double capacity = static_cast<double>(p_.wafer.dram_per_die) * p_.wafer.dies();
  e.dram_utilisation = std::accumulate(e.die_used.begin(), e.die_used.end(), 0.0) / capacity;
  // WATOS's t_max, taken as the iteration time per pipeline slot: equal to t_max when the
  // stages are balanced, and unlike the bare maximum it improves whenever any stage gets faster,
  // which gives the search a slope across the plateaus of max().
  const double t_slot = e.iteration_time / (p_.micro_batches + p_.stages - 1);
  e.fitness = topology::TimeCostFitness(t_slot, e.global_cost, t_ref);
  if (!e.fits) {
    e.fitness += kInfeasibleScale * t_ref * (1 + static_cast<double>(e.shortfall) / capacity);
  }
}

}  // namespace chameleon::plan
