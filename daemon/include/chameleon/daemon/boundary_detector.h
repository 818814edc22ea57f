// Finds the iteration boundary of a training loop from its op-token stream alone.
//
// 1. For n = 1, 2, ... up to max_gram, every token n-gram whose occurrences are evenly spaced
//    (most gaps within gap_tolerance of the median gap, none much longer, few much shorter) is a
//    candidate and votes for its median gap as the period.
// 2. Periods are tried in order of votes (ties: the shorter). The earliest-occurring candidate
//    of that period is extended back to where the periodic part of the stream begins, so the
//    boundary falls on the first op of an iteration; the shortest n-gram starting there that
//    recurs exactly once per period is the signature.
// 3. The periodic part must cover at least half of the window and last until its end (a run of
//    identical blocks inside one iteration is periodic only for a while), and the cut is confirmed:
//    consecutive segments must be similar (bigram cosine and length) for at least min_periods
//    comparisons and a third of all of them.
// Pure function of its input; safe to call from any thread. docs/detection.md has the rationale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "chameleon/daemon/bigram_similarity.h"

namespace chameleon::daemon {

struct BoundaryParams {
  std::uint32_t min_periods = 3;
  std::uint32_t max_gram = 8;
  std::uint32_t min_period = 8;
  double gap_tolerance = 0.10;
  StabilityThresholds stability;
};

/// A detected boundary.
struct Boundary {
  std::vector<std::uint32_t> signature;  ///< the n-gram that starts every iteration
  std::uint64_t period = 0;              ///< median ops per iteration
  std::size_t first = 0;                 ///< index of the signature's first occurrence
  std::uint32_t confirmed = 0;           ///< stable comparisons that confirmed it
};

/// Detects the boundary in `tokens`; std::nullopt when no period is confirmed (yet).
std::optional<Boundary> DetectBoundary(std::span<const std::uint32_t> tokens,
                                       const BoundaryParams& params);

/// Start indices of every non-overlapping occurrence of `gram` in `tokens`, from `from` on.
std::vector<std::size_t> FindOccurrences(std::span<const std::uint32_t> tokens,
                                         std::span<const std::uint32_t> gram, std::size_t from = 0);

}  // namespace chameleon::daemon
