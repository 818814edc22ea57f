// The node's predicted iteration time under a set of grants (node_placement.h states the model).
#include <algorithm>
#include <cmath>
#include <limits>

#include "chameleon/topology/node_placement.h"

namespace chameleon::topology {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// One direction of the swap: out (GPU -> helper) in the forward pass, in (helper -> GPU) in the
// backward pass. They never overlap in time, so each has its own link loads.
enum class Phase { kOut, kIn };

// Link indices of the route between the two ends of a grant in `phase`; empty if unreachable.
std::vector<int> RouteLinks(const Topology& topo, int gpu, int helper, Phase phase) {
  const std::vector<int> route =
      phase == Phase::kOut ? topo.Route(gpu, helper) : topo.Route(helper, gpu);
  std::vector<int> links;
  for (std::size_t i = 1; i < route.size(); ++i) {
    links.push_back(topo.LinkIndex(route[i - 1], route[i]));
  }
  return links;
}

// Seconds each client's transfers take in `phase`, link sharing included.
std::vector<double> PhaseSeconds(const Topology& topo, const std::vector<SwapDemand>& demands,
                                 const std::vector<Helper>& helpers,
                                 const std::vector<Grant>& grants, Phase phase) {
  std::vector<std::vector<int>> routes;
  std::vector<double> load(topo.links().size(), 0.0);
  for (const Grant& g : grants) {
    const int gpu = demands[g.sender].place;
    const int helper = helpers[g.helper].place;
    routes.push_back(gpu == helper ? std::vector<int>{} : RouteLinks(topo, gpu, helper, phase));
    for (int l : routes.back()) load[l] += static_cast<double>(g.bytes);
  }
  std::vector<double> seconds(demands.size(), 0.0);
  for (std::size_t i = 0; i < grants.size(); ++i) {
    const Grant& g = grants[i];
    if (g.bytes == 0) continue;
    const int gpu = demands[g.sender].place;
    const int helper = helpers[g.helper].place;
    if (gpu == helper) continue;  // a GPU lending to itself moves nothing
    if (routes[i].empty()) {
      seconds[g.sender] = kInfinity;
      continue;
    }
    double drain = 0;
    for (int l : routes[i]) drain = std::max(drain, load[l] / topo.links()[l].bandwidth);
    const double latency =
        phase == Phase::kOut ? topo.Latency(gpu, helper) : topo.Latency(helper, gpu);
    seconds[g.sender] = std::max(seconds[g.sender], drain + latency);
  }
  return seconds;
}

}  // namespace

double PredictedIterationSeconds(const Topology& topo, const std::vector<SwapDemand>& demands,
                                 const std::vector<Helper>& helpers,
                                 const std::vector<Grant>& grants) {
  const std::vector<double> out = PhaseSeconds(topo, demands, helpers, grants, Phase::kOut);
  const std::vector<double> in = PhaseSeconds(topo, demands, helpers, grants, Phase::kIn);
  double node = 0;
  for (std::size_t c = 0; c < demands.size(); ++c) {
    const double penalty = std::max(0.0, out[c] + in[c] - demands[c].window_s);
    node = std::max(node, demands[c].iteration_s + penalty);
  }
  return node;
}

}  // namespace chameleon::topology
