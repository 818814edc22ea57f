// What one replayed iteration does: the ops in launch order (possibly perturbed) and, for the
// storages that live only within the iteration, where each is allocated and freed.
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/trace/workload.h"

namespace chameleon::replay {

struct Allocation {
  std::uint32_t storage;  ///< index in Workload::storages
  bool init;              ///< its first op reads it: fill it first (placement-independence)
};

/// Not thread-safe; plain value.
struct IterationPlan {
  std::vector<std::uint32_t> ops;                      ///< Workload::ops indices, launch order
  std::vector<std::vector<Allocation>> alloc_before;   ///< per position
  std::vector<std::vector<std::uint32_t>> free_after;  ///< per position
};

/// The recorded op order of `step`.
std::vector<std::uint32_t> StepOps(const trace::Workload& w, std::size_t step);

/// Applies max(1, round(fraction * n)) edits, each chosen by `seed`'s generator: remove an op,
/// insert a copy of an op elsewhere, or swap two neighbours. Deterministic in (ops, seed).
std::vector<std::uint32_t> Perturb(std::vector<std::uint32_t> ops, double fraction,
                                   std::uint64_t seed);

/// Allocation just before a non-persistent storage's first use in `ops`, free right after its
/// last; storages `ops` never touches are not allocated at all.
IterationPlan PlanIteration(const trace::Workload& w, std::vector<std::uint32_t> ops);

}  // namespace chameleon::replay
