// A generic, seeded genetic optimiser (WATOS §search): tournament selection, an elite fraction
// carried over unchanged, children mutated by pluggable operators, started from a given (greedy)
// answer. The wafer planner plugs in Op1-Op5, node placement Op4/Op5 only.
//
// Lower fitness is better. Every distinct genome (by `key`) is evaluated once and counted; the
// evaluation budget bounds distinct evaluations, which is what a comparison with random search
// or exhaustive enumeration must hold equal. Deterministic for a seed: all draws come from Rng.
// Not thread-safe (one call runs one search; separate calls are independent).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chameleon/topology/rng.h"

namespace chameleon::topology {

/// WATOS fitness is t_max × GlobalCost, which is 0 for any plan that borrows nothing, so every
/// such plan would tie at the best score whatever its t_max. We use t × (1 + cost / t_ref): the
/// same ordering as the product when borrowing dominates, t itself when nothing is borrowed.
/// `t_ref` is a fixed time scale of the search (the planner uses the greedy plan's t_max).
inline double TimeCostFitness(double t, double cost, double t_ref) {
  return t * (1.0 + cost / t_ref);
}

struct GeneticOptions {
  int population = 32;           ///< WATOS: 20-50
  double elite_fraction = 0.25;  ///< ω, copied unchanged into the next generation
  double mutation_rate = 0.2;    ///< chance of each further operator after the first
  int tournament_size = 3;
  int max_generations = 100;
  std::size_t max_evaluations = 0;  ///< distinct genomes evaluated; 0 = no limit
  int stall_generations = 0;        ///< stop after this many without improvement; 0 = never
  std::uint64_t seed = 1;
};

template <class Genome>
struct GeneticProblem {
  std::function<double(const Genome&)> fitness;   ///< lower is better
  std::function<std::string(const Genome&)> key;  ///< identity of a genome
  /// Mutation operators; one returns false when it cannot apply to this genome.
  std::vector<std::function<bool(Genome&, Rng&)>> operators;
  /// Optional: a child of two parents.
  std::function<Genome(const Genome&, const Genome&, Rng&)> crossover;
};

template <class Genome>
struct GeneticResult {
  Genome best;
  double best_fitness = 0;
  std::size_t evaluations = 0;
  int generations = 0;
};

namespace detail {

template <class Genome>
class GeneticRun {
 public:
  GeneticRun(const GeneticProblem<Genome>& p, const GeneticOptions& o)
      : p_(p), o_(o), rng_(o.seed) {}

  GeneticResult<Genome> Run(const Genome& initial) {
    std::vector<Scored> pop{Score(initial)};
    while (static_cast<int>(pop.size()) < o_.population && !Exhausted()) {
      pop.push_back(Score(Mutated(initial)));
    }
    Sort(pop);
    GeneticResult<Genome> result{pop.front().genome, pop.front().fitness, 0, 0};
    int stall = 0;
    while (result.generations < o_.max_generations && !Exhausted()) {
      pop = NextGeneration(pop);
      ++result.generations;
      if (pop.front().fitness < result.best_fitness) {
        result.best = pop.front().genome, result.best_fitness = pop.front().fitness, stall = 0;
      } else if (o_.stall_generations > 0 && ++stall >= o_.stall_generations) {
        break;
      }
    }
    result.evaluations = cache_.size();
    return result;
  }

 private:
  struct Scored {
    Genome genome;
    double fitness;
  };

  bool Exhausted() const { return o_.max_evaluations > 0 && cache_.size() >= o_.max_evaluations; }

  Scored Score(const Genome& g) {
    const std::string k = p_.key(g);
    auto it = cache_.find(k);
    if (it == cache_.end()) it = cache_.emplace(k, p_.fitness(g)).first;
    return Scored{g, it->second};
  }

  static void Sort(std::vector<Scored>& pop) {
    std::stable_sort(pop.begin(), pop.end(),
                     [](const Scored& a, const Scored& b) { return a.fitness < b.fitness; });
  }

  bool ApplyOne(Genome& g) {
    for (int tries = 0; tries < 4; ++tries) {
      if (p_.operators[rng_.Index(p_.operators.size())](g, rng_)) return true;
    }
    return false;
  }

  // One operator always, a further one with probability mutation_rate each; then, so that a
  // slot is not wasted on a genome already seen, a few more tries to reach an unseen one.
  Genome Mutated(Genome g) {
    ApplyOne(g);
    while (rng_.Unit() < o_.mutation_rate) ApplyOne(g);
    for (int tries = 0; tries < 8 && cache_.count(p_.key(g)); ++tries) ApplyOne(g);
    return g;
  }

  const Scored& Tournament(const std::vector<Scored>& pop) {
    const Scored* best = &pop[rng_.Index(pop.size())];
    for (int i = 1; i < o_.tournament_size; ++i) {
      const Scored& c = pop[rng_.Index(pop.size())];
      if (c.fitness < best->fitness) best = &c;
    }
    return *best;
  }

  std::vector<Scored> NextGeneration(const std::vector<Scored>& pop) {
    const auto elites = static_cast<std::size_t>(
        std::max(1.0, std::ceil(o_.elite_fraction * static_cast<double>(pop.size()))));
    std::vector<Scored> next(pop.begin(), pop.begin() + std::min(elites, pop.size()));
    while (next.size() < pop.size() && !Exhausted()) {
      Genome child = Tournament(pop).genome;
      if (p_.crossover) child = p_.crossover(child, Tournament(pop).genome, rng_);
      next.push_back(Score(Mutated(std::move(child))));
    }
    Sort(next);
    return next;
  }

  const GeneticProblem<Genome>& p_;
  const GeneticOptions& o_;
  Rng rng_;
  std::unordered_map<std::string, double> cache_;
};

}  // namespace detail

/// Runs the search from `initial` (evaluated first, so the result is never worse than it).
template <class Genome>
GeneticResult<Genome> RunGenetic(const Genome& initial, const GeneticProblem<Genome>& problem,
                                 const GeneticOptions& options) {
  return detail::GeneticRun<Genome>(problem, options).Run(initial);
}

}  // namespace chameleon::topology
