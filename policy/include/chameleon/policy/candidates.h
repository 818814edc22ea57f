// Swap candidates: a tensor's idle interval between two uses, scored as in the paper.
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/policy/layers.h"
#include "chameleon/policy/memory.h"
#include "chameleon/policy/options.h"
#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// One idle interval of one tensor: used at `last_use_op`, next used at `next_use_op`, untouched
/// in between. The paper's main case is last forward use -> first backward use; any gap long
/// enough to hold a swap-out and a swap-in (at least two logical layers apart) qualifies, and
/// with GapRule::kAnyLength any gap with an op in it (its transfers stall). With
/// GeneratorOptions::cross_iteration, a tensor live across iterations also has the gap from its
/// last use to its first use in the next iteration: next_use_op is then first use + ops
/// (coordinates of two iterations back to back).
struct Candidate {
  std::uint32_t tensor = 0;
  std::uint32_t last_use_op = 0;
  std::uint32_t next_use_op = 0;
  std::uint64_t bytes = 0;
  std::uint32_t mre_count = 0;  ///< MRL entries strictly inside the gap
  double score = 0;             ///< N̂_MRE + C·Ŝ
  /// Device bytes a swap frees: `bytes` rounded per GeneratorOptions::chunk_bytes.
  std::uint64_t device_bytes = 0;
};

/// Which idle intervals are candidates.
enum class GapRule : std::uint8_t {
  kTwoLayers,  ///< at least two logical layers apart (room for both transfers: the paper)
  kAnyLength,  ///< any gap with an op in it (GeneratorOptions::short_gaps)
};

/// All candidates of swappable tensors of at least options.min_swap_bytes whose gap satisfies
/// `rule` and covers at least one MRL entry, scored and sorted best first (ties: larger, then
/// earlier, then lower tensor index, so the order is deterministic).
/// `mre_prefix[i]` = number of MRL entries among ops [0, i). Pure.
std::vector<Candidate> FindCandidates(const Profile& profile, const LayerGrid& grid,
                                      const std::vector<std::uint32_t>& mre_prefix,
                                      const GeneratorOptions& options,
                                      GapRule rule = GapRule::kTwoLayers);

}  // namespace chameleon::policy
