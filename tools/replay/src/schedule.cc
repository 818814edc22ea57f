#include "schedule.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace chameleon::replay {
namespace {

struct SplitMix {
  std::uint64_t state;
  std::uint64_t Next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t Below(std::size_t n) { return static_cast<std::size_t>(Next() % n); }
};

}  // namespace

std::vector<std::uint32_t> StepOps(const trace::Workload& w, std::size_t step) {
  std::vector<std::uint32_t> ops;
  for (std::uint32_t k = w.steps.at(step).first_op; k < w.steps[step].end_op; ++k) ops.push_back(k);
  return ops;
}

std::vector<std::uint32_t> Perturb(std::vector<std::uint32_t> ops, double fraction,
                                   std::uint64_t seed) {
  SplitMix rng{seed};
  const auto edits =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(fraction * ops.size())));
  for (std::size_t e = 0; e < edits && !ops.empty(); ++e) {
    switch (rng.Below(3)) {
      case 0:  // remove (keep at least one op)
        if (ops.size() > 1)
          ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(rng.Below(ops.size())));
        break;
      case 1: {  // insert a copy of some op at some position
        const std::uint32_t op = ops[rng.Below(ops.size())];
        ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(rng.Below(ops.size() + 1)), op);
        break;
      }
      default:  // reorder two neighbours
        if (ops.size() > 1) {
          const std::size_t q = rng.Below(ops.size() - 1);
          std::swap(ops[q], ops[q + 1]);
        }
    }
  }
  return ops;
}

IterationPlan PlanIteration(const trace::Workload& w, std::vector<std::uint32_t> ops) {
  IterationPlan plan;
  plan.alloc_before.resize(ops.size());
  plan.free_after.resize(ops.size());
  // A storage is allocated where the trace created it (an aten::empty may precede its first
  // kernel), or at its first use when that op comes earlier or the creating op is gone.
  std::vector<std::vector<std::uint32_t>> created_at(w.ops.size());
  for (std::uint32_t s = 0; s < w.storages.size(); ++s) {
    const auto& inst = w.storages[s];
    if (!inst.persistent && inst.create_op >= 0) created_at[inst.create_op].push_back(s);
  }
  struct Span {
    std::size_t first, last;
    bool used, init;  // init: the first op that uses it reads it
  };
  std::unordered_map<std::uint32_t, Span> spans;
  std::vector<std::uint32_t> order;  // allocation order, for a deterministic plan
  for (std::size_t q = 0; q < ops.size(); ++q) {
    const trace::WorkOp& op = w.ops[ops[q]];
    auto touch = [&](std::uint32_t s, bool use, bool read) {
      if (w.storages[s].persistent) return;
      auto [it, fresh] = spans.try_emplace(s, Span{q, q, false, false});
      if (fresh) order.push_back(s);
      if (use) {
        if (!it->second.used) it->second.init = read;
        it->second.used = true;
        it->second.last = q;
      }
    };
    for (std::uint32_t s : created_at[ops[q]]) touch(s, false, false);
    // All reads before writes: an op that reads and writes a fresh storage reads it first.
    for (std::uint32_t s : op.reads) touch(s, true, true);
    for (std::uint32_t s : op.writes) touch(s, true, false);
  }
  for (std::uint32_t s : order) {
    const Span& span = spans.at(s);
    if (!span.used) continue;  // its users were removed by a perturbation
    plan.alloc_before[span.first].push_back(Allocation{s, span.init});
    plan.free_after[span.last].push_back(s);
  }
  plan.ops = std::move(ops);
  return plan;
}

}  // namespace chameleon::replay
