#include "plan_search.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <unordered_set>

namespace chameleon::plan {
namespace {

using topology::Rng;
constexpr unsigned kFullMask = (1U << kOpGroups) - 1;

template <class T>
void Append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double ReferenceTime(const PlanEvaluator& ev, const PlanGenome& start) {
  return ev.Evaluate(start, 1.0).t_max;
}

int TwoDistinct(Rng& rng, int n, int& other) {
  const int a = rng.Index(n);
  other = (a + 1 + rng.Index(n - 1)) % n;
  return a;
}

std::vector<topology::Helper> HelpersOf(const PlanEvaluator& ev, const PlanGenome& g) {
  std::vector<topology::Sender> senders;
  std::vector<topology::Helper> helpers;
  ev.SendersAndHelpers(ev.DieDemand(g), senders, helpers);
  return helpers;
}

// WATOS's five operators. Op1-Op3 change the memory picture, so Alg. 3 re-pairs afterwards.
topology::GeneticProblem<PlanGenome> MakeGeneticProblem(const PlanEvaluator& ev,
                                                        const SearchOptions& o, double t_ref) {
  topology::GeneticProblem<PlanGenome> p;
  const int n = ev.problem().stages;
  p.fitness = [&ev, t_ref](const PlanGenome& g) { return ev.Evaluate(g, t_ref).fitness; };
  p.key = GenomeKey;
  if (o.recompute) {
    p.operators.push_back([&ev, n](PlanGenome& g, Rng& rng) {  // Op1
      g.recompute[rng.Index(n)] ^= 1U << rng.Index(kOpGroups);
      ev.Reallocate(g);
      return true;
    });
    p.operators.push_back([&ev, n](PlanGenome& g, Rng& rng) {  // Op2
      int b = 0;
      const int a = n > 1 ? TwoDistinct(rng, n, b) : 0;
      if (n < 2 || g.recompute[a] == g.recompute[b]) return false;
      std::swap(g.recompute[a], g.recompute[b]);
      ev.Reallocate(g);
      return true;
    });
    p.crossover = [&ev, n](const PlanGenome& a, const PlanGenome& b, Rng& rng) {
      PlanGenome child = a;
      for (int s = 0; s < n; ++s)
        child.recompute[s] = rng.Below(2) ? b.recompute[s] : a.recompute[s];
      if (child.recompute != a.recompute) ev.Reallocate(child);
      return child;
    };
  }
  if (o.positions && n > 1) {
    p.operators.push_back([&ev, n](PlanGenome& g, Rng& rng) {  // Op3
      int b = 0;
      const int a = TwoDistinct(rng, n, b);
      std::swap(g.slot[a], g.slot[b]);
      ev.Reallocate(g);
      return true;
    });
  }
  if (o.pairings) {
    p.operators.push_back([&ev](PlanGenome& g, Rng& rng) {  // Op4
      return topology::MutatePairing(g.grants, HelpersOf(ev, g), rng);
    });
    p.operators.push_back([](PlanGenome& g, Rng& rng) {  // Op5
      return topology::ExchangePairings(g.grants, rng);
    });
  }
  return p;
}

SearchResult Finish(const PlanEvaluator& ev, PlanGenome best, double t_ref,
                    std::chrono::steady_clock::time_point start) {
  SearchResult r;
  r.evaluation = ev.Evaluate(best, t_ref);
  r.best = std::move(best);
  r.best.grants = r.evaluation.grants;
  r.t_ref = t_ref;
  r.seconds = Seconds(start);
  return r;
}

}  // namespace

std::string GenomeKey(const PlanGenome& g) {
  std::string key;
  key.reserve(g.slot.size() * 8 + g.grants.size() * 16);
  for (int s : g.slot) Append(key, static_cast<std::uint16_t>(s));
  for (unsigned m : g.recompute) Append(key, static_cast<std::uint8_t>(m));
  for (const topology::Grant& gr : g.grants) {
    Append(key, static_cast<std::uint16_t>(gr.sender));
    Append(key, static_cast<std::uint16_t>(gr.helper));
    Append(key, gr.bytes);
  }
  return key;
}

PlanGenome GreedyStart(const PlanEvaluator& ev) {
  static constexpr int kOrder[kOpGroups] = {2, 1, 0};  // MLP, attention core, projections
  PlanGenome g = ev.InOrder();
  for (;;) {
    ev.Reallocate(g);
    std::vector<topology::Sender> senders;
    std::vector<topology::Helper> helpers;
    const std::vector<double> demand = ev.DieDemand(g);
    ev.SendersAndHelpers(demand, senders, helpers);
    if (topology::CheckAllocation(senders, helpers, g.grants, true).empty()) return g;
    int worst = -1;
    double worst_demand = -1;
    for (int s = 0; s < ev.problem().stages; ++s) {
      const double d = demand[ev.problem().slot_dies[g.slot[s]].front()];
      if (g.recompute[s] != kFullMask && d > worst_demand) worst = s, worst_demand = d;
    }
    if (worst < 0) return g;  // everything recomputed and still short: the best partial plan
    for (int group : kOrder) {
      if (!(g.recompute[worst] >> group & 1U)) {
        g.recompute[worst] |= 1U << group;
        break;
      }
    }
  }
}

PlanGenome MegatronBaseline(const PlanEvaluator& ev) {
  PlanGenome g = ev.InOrder();
  const auto cap = static_cast<double>(ev.problem().wafer.dram_per_die);
  const std::vector<double> plain = ev.DieDemand(g);
  if (*std::max_element(plain.begin(), plain.end()) > cap)
    g.recompute.assign(g.slot.size(), kFullMask);
  std::vector<topology::Sender> senders;
  std::vector<topology::Helper> helpers;
  ev.SendersAndHelpers(ev.DieDemand(g), senders, helpers);
  std::vector<std::uint64_t> spare;
  spare.reserve(helpers.size());
  for (const auto& h : helpers) spare.push_back(h.bytes);
  for (int s = 0; s < static_cast<int>(senders.size()); ++s) {
    std::uint64_t need = senders[s].bytes;
    for (int h = 0; h < static_cast<int>(helpers.size()) && need > 0; ++h) {
      const std::uint64_t take = std::min(need, spare[h]);
      if (take > 0) g.grants.push_back({s, h, take});
      spare[h] -= take;
      need -= take;
    }
  }
  topology::NormaliseGrants(g.grants);
  return g;
}

SearchResult SearchPlan(const PlanEvaluator& ev, const SearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const PlanGenome initial = GreedyStart(ev);
  const double t_ref = ReferenceTime(ev, initial);
  const auto problem = MakeGeneticProblem(ev, options, t_ref);
  if (problem.operators.empty()) return Finish(ev, initial, t_ref, start);
  const auto ga = topology::RunGenetic(initial, problem, options.ga);
  SearchResult r = Finish(ev, ga.best, t_ref, start);
  r.evaluations = ga.evaluations;
  r.generations = ga.generations;
  return r;
}

SearchResult RandomSearch(const PlanEvaluator& ev, const SearchOptions& options,
                          std::size_t budget) {
  const auto start = std::chrono::steady_clock::now();
  const PlanGenome initial = GreedyStart(ev);
  const double t_ref = ReferenceTime(ev, initial);
  Rng rng(options.ga.seed);
  std::unordered_set<std::string> seen;
  PlanGenome best = initial;
  double best_fitness = ev.Evaluate(initial, t_ref).fitness;
  seen.insert(GenomeKey(initial));
  for (std::size_t tries = 0; seen.size() < budget && tries < 100 * budget; ++tries) {
    PlanGenome g = initial;
    const int n = ev.problem().stages;
    if (options.recompute) {
      for (unsigned& m : g.recompute) m = static_cast<unsigned>(rng.Below(kFullMask + 1));
    }
    for (int i = n - 1; options.positions && i > 0; --i)
      std::swap(g.slot[i], g.slot[rng.Index(i + 1)]);
    ev.Reallocate(g);
    if (!seen.insert(GenomeKey(g)).second) continue;
    const double f = ev.Evaluate(g, t_ref).fitness;
    if (f < best_fitness) best = g, best_fitness = f;
  }
  SearchResult r = Finish(ev, best, t_ref, start);
  r.evaluations = seen.size();
  return r;
}

SearchResult ExhaustiveRecompute(const PlanEvaluator& ev) {
  const int bits = kOpGroups * ev.problem().stages;
  if (bits > 24) throw std::invalid_argument("exhaustive search limited to 2^24 plans");
  const auto start = std::chrono::steady_clock::now();
  const PlanGenome initial = GreedyStart(ev);
  const double t_ref = ReferenceTime(ev, initial);
  PlanGenome g = ev.InOrder();
  PlanGenome best = g;
  double best_fitness = std::numeric_limits<double>::infinity();
  for (std::uint64_t code = 0; code < (1ULL << bits); ++code) {
    for (int s = 0; s < ev.problem().stages; ++s)
      g.recompute[s] = (code >> (kOpGroups * s)) & kFullMask;
    ev.Reallocate(g);
    const double f = ev.Evaluate(g, t_ref).fitness;
    if (f < best_fitness) best = g, best_fitness = f;
  }
  SearchResult r = Finish(ev, best, t_ref, start);
  r.evaluations = 1ULL << bits;
  return r;
}

}  // namespace chameleon::plan
