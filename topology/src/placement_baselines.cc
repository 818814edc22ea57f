// Exhaustive and random search over the discretised placement space (placement_baselines.h).
#include "chameleon/topology/placement_baselines.h"

#include <limits>
#include <optional>
#include <string>
#include <unordered_set>

namespace chameleon::topology {
namespace {

// Depth-first over (demand, helper) cells: cell (d, h) takes 0..min(left of d, free of h)
// units; the last helper of a demand must take exactly what is left.
class Enumerator {
 public:
  Enumerator(const std::vector<SwapDemand>& demands, const std::vector<Helper>& helpers,
             std::uint64_t quantum, const std::function<void(const std::vector<Grant>&)>& visit,
             std::uint64_t limit)
      : visit_(visit), limit_(limit) {
    for (const SwapDemand& d : demands) need_.push_back(d.bytes / quantum);
    for (const Helper& h : helpers) free_.push_back(h.bytes / quantum);
    quantum_ = quantum;
  }

  std::uint64_t Run() {
    if (free_.empty()) {
      bool none = true;
      for (std::uint64_t n : need_) none = none && n == 0;
      if (none) Emit();
      return count_;
    }
    Cell(0, 0, need_.empty() ? 0 : need_[0]);
    return count_;
  }

 private:
  bool Done() const { return limit_ > 0 && count_ >= limit_; }

  void Cell(std::size_t d, std::size_t h, std::uint64_t left) {
    if (Done()) return;
    if (d == need_.size()) return Emit();
    const bool last = h + 1 == free_.size();
    const std::uint64_t most = std::min(left, free_[h]);
    for (std::uint64_t take = last ? left : 0; take <= most && !Done(); ++take) {
      free_[h] -= take;
      if (take > 0) grants_.push_back(Grant{static_cast<int>(d), static_cast<int>(h), take});
      if (last) {
        Cell(d + 1, 0, d + 1 < need_.size() ? need_[d + 1] : 0);
      } else {
        Cell(d, h + 1, left - take);
      }
      if (take > 0) grants_.pop_back();
      free_[h] += take;
    }
  }

  void Emit() {
    std::vector<Grant> out = grants_;
    for (Grant& g : out) g.bytes *= quantum_;
    visit_(out);  // grants_ is built in (demand, helper) order, so it is already normalised
    ++count_;
  }

  const std::function<void(const std::vector<Grant>&)>& visit_;
  std::uint64_t limit_;
  std::uint64_t quantum_ = 1;
  std::vector<std::uint64_t> need_;
  std::vector<std::uint64_t> free_;
  std::vector<Grant> grants_;
  std::uint64_t count_ = 0;
};

// One random covering placement, or nullopt when a unit found no helper with room.
std::optional<std::vector<Grant>> Draw(const std::vector<SwapDemand>& demands,
                                       const std::vector<Helper>& helpers, std::uint64_t quantum,
                                       Rng& rng) {
  std::vector<std::uint64_t> free;
  free.reserve(helpers.size());
  for (const Helper& h : helpers) free.push_back(h.bytes / quantum);
  std::vector<Grant> grants;
  std::vector<int> open;
  for (std::size_t d = 0; d < demands.size(); ++d) {
    for (std::uint64_t u = 0; u < demands[d].bytes / quantum; ++u) {
      open.clear();
      for (std::size_t h = 0; h < free.size(); ++h) {
        if (free[h] > 0) open.push_back(static_cast<int>(h));
      }
      if (open.empty()) return std::nullopt;
      const int h = open[rng.Index(open.size())];
      --free[h];
      grants.push_back(Grant{static_cast<int>(d), h, quantum});
    }
  }
  NormaliseGrants(grants);
  return grants;
}

std::string Key(const std::vector<Grant>& grants) {
  std::string key;
  for (const Grant& g : grants) {
    key += std::to_string(g.sender) + ':' + std::to_string(g.helper) + ':' +
           std::to_string(g.bytes) + ';';
  }
  return key;
}

}  // namespace

std::uint64_t ForEachPlacement(const std::vector<SwapDemand>& demands,
                               const std::vector<Helper>& helpers, std::uint64_t quantum,
                               const std::function<void(const std::vector<Grant>&)>& visit,
                               std::uint64_t limit) {
  if (quantum == 0) return 0;
  return Enumerator(demands, helpers, quantum, visit, limit).Run();
}

BaselineResult ExhaustiveOptimum(const Topology& topo, const std::vector<SwapDemand>& demands,
                                 const std::vector<Helper>& helpers, std::uint64_t quantum,
                                 double t_ref) {
  BaselineResult r;
  r.best_fitness = std::numeric_limits<double>::infinity();
  r.evaluations = ForEachPlacement(demands, helpers, quantum, [&](const std::vector<Grant>& g) {
    const double f = PlacementFitness(topo, demands, helpers, g, t_ref);
    if (f < r.best_fitness) r.best = g, r.best_fitness = f;
  });
  return r;
}

BaselineResult RandomSearch(const Topology& topo, const std::vector<SwapDemand>& demands,
                            const std::vector<Helper>& helpers, std::uint64_t quantum, double t_ref,
                            std::uint64_t evaluations, std::uint64_t seed) {
  BaselineResult r;
  r.best_fitness = std::numeric_limits<double>::infinity();
  if (quantum == 0) return r;
  Rng rng(seed);
  std::unordered_set<std::string> seen;
  for (std::uint64_t draws = 0; seen.size() < evaluations && draws < 100 * evaluations; ++draws) {
    const std::optional<std::vector<Grant>> g = Draw(demands, helpers, quantum, rng);
    if (!g || !seen.insert(Key(*g)).second) continue;
    const double f = PlacementFitness(topo, demands, helpers, *g, t_ref);
    if (f < r.best_fitness) r.best = *g, r.best_fitness = f;
  }
  r.evaluations = seen.size();
  return r;
}

}  // namespace chameleon::topology
