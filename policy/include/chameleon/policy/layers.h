// Logical layers: the time grid of the swap simulator (paper: equal-size groups of forward and
// backward ops, each timed as T_iter / N_ops × N_ops_in_group; valid because layers repeat).
// Here each group is timed as the sum of its ops' times (op_seconds.h): measured ones where the
// profile has them, the paper's uniform share otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// A contiguous group of ops [first_op, last_op].
struct LogicalLayer {
  std::uint32_t first_op = 0;
  std::uint32_t last_op = 0;
  Phase phase = Phase::kUnknown;
  double time_s = 0;  ///< the sum of op_s over [first_op, last_op]
};

/// The layers of an iteration and the op -> layer map.
struct LayerGrid {
  std::vector<LogicalLayer> layers;
  std::vector<std::uint32_t> layer_of_op;
};

/// Splits `phases` (one per op) into maximal runs of one phase; each run of a phase gets a share
/// of `layers_per_phase` groups proportional to its length (at least one, at most one per op),
/// split into equal-size groups (by op count). `op_s`: each op's time (as many as `phases`). Pure.
LayerGrid BuildLayers(const std::vector<Phase>& phases, const std::vector<double>& op_s,
                      std::uint32_t layers_per_phase);

}  // namespace chameleon::policy
