// Matching tensors across iterations by cheap integer features, not by address (allocators hand
// out different addresses every iteration).
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// The features of one tensor in one iteration.
///  - bytes: allocation size;
///  - use_count: ops that read or write it;
///  - token_tag: bit-OR over its users of (1 << token % 32);
///  - position_hash: FNV-1a over the (token, occurrence) anchors of its first use (producer) and
///    last use (final consumer) - anchors, not op indices, so unrelated inserted ops do not move
///    it;
///  - match_key: FNV-1a over the four above; equal keys = same tensor role.
///  - relative_position: first use / ops in the iteration, and mean_position: mean of all uses /
///    ops (tie-breakers only, not in the key: tensors first used by one op, e.g. parameters touched
///    by a fused zero_grad, still differ in where else they are used).
struct TensorFeatures {
  std::uint64_t bytes = 0;
  std::uint32_t use_count = 0;
  std::uint32_t token_tag = 0;
  std::uint64_t position_hash = 0;
  std::uint64_t match_key = 0;
  double relative_position = 0;
  double mean_position = 0;
};

/// Features of every tensor of `profile` (index = tensor index). `profile` must be valid.
std::vector<TensorFeatures> ComputeFeatures(const Profile& profile);

/// Similarity in [0, 1]: 0 when sizes differ, else 0.3·[use_count equal] + 0.3·[tag equal]
/// + 0.4·max(0, 1 - (|Δrelative_position| + |Δmean_position|) / 0.05). The position hash is left
/// out on purpose: after an inserted op shifts a token's occurrences by one, a tensor's hash
/// equals its *neighbour's* reference hash.
double Similarity(const TensorFeatures& a, const TensorFeatures& b);

struct MatcherOptions {
  double threshold = 0.5;     ///< minimum Similarity for a match
  std::uint32_t window = 64;  ///< alignment band: how far (in same-size tensors) a match may drift
};

/// Maps a new iteration's tensors onto reference (policy) tensors, one to one.
/// Immutable after construction; Match is const and thread-safe.
class Matcher {
 public:
  explicit Matcher(std::vector<TensorFeatures> reference, MatcherOptions options = {});

  /// For each tensor of `current`, the index of its reference tensor, or -1. Per size, both
  /// iterations' tensors are ordered by (first use, mean use) and aligned order-preservingly to
  /// maximise the total Similarity (pairs below the threshold are never matched), so a tensor
  /// created by an inserted op stays unmatched instead of shifting its neighbours' matches.
  /// O(tensors · window).
  std::vector<std::int32_t> Match(const std::vector<TensorFeatures>& current) const;

 private:
  std::vector<TensorFeatures> reference_;
  MatcherOptions options_;
};

}  // namespace chameleon::policy
