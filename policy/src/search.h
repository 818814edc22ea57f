// Internal: the search over placement orders. The paper places candidates best score first
// until the MRL is empty; a single greedy order can be far from the optimum when the link is
// short, so several strategies (pass sequences) run on fresh simulators and the best plan wins,
// then a few drop-one moves try to remove the costliest stalls.
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/policy/candidates.h"
#include "chameleon/policy/options.h"
#include "chameleon/policy/plan.h"

namespace chameleon::policy::detail {

struct SearchOutcome {
  std::vector<PlannedSwap> swaps;
  std::vector<std::uint32_t> candidates;  ///< index in the candidate list of each swap
  std::int64_t max_excess = 0;            ///< <= 0: the plan fits
  double stall = 0;
};

/// The best plan over the strategies and refinement moves: fitting first, then least stall,
/// then fewest swaps; ties keep the earlier strategy. Deterministic.
SearchOutcome SearchSwaps(const std::vector<Candidate>& by_score, const LayerGrid& grid,
                          const std::vector<std::int64_t>& excess, const GeneratorOptions& options);

}  // namespace chameleon::policy::detail
