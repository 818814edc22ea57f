#include "chameleon/policy/matcher.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "chameleon/policy/anchors.h"
#include "chameleon/policy/fnv1a.h"
#include "ordered_alignment.h"

namespace chameleon::policy {
namespace {

std::uint64_t AnchorWord(OpAnchor a) { return (std::uint64_t{a.token} << 32) | a.occurrence; }

// Indices of `features`, grouped by `key`, each group in order of position.
template <typename Key>
std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> GroupBy(
    const std::vector<TensorFeatures>& features, Key key) {
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> groups;
  for (std::size_t i = 0; i < features.size(); ++i) {
    groups[key(features[i])].push_back(static_cast<std::uint32_t>(i));
  }
  for (auto& [k, members] : groups) {
    std::stable_sort(members.begin(), members.end(), [&](std::uint32_t a, std::uint32_t b) {
      const TensorFeatures& x = features[a];
      const TensorFeatures& y = features[b];
      if (x.relative_position != y.relative_position) {
        return x.relative_position < y.relative_position;
      }
      return x.mean_position < y.mean_position;
    });
  }
  return groups;
}

}  // namespace

std::vector<TensorFeatures> ComputeFeatures(const Profile& profile) {
  const std::vector<OpAnchor> anchors = AnchorOps(profile);
  const double ops = static_cast<double>(std::max<std::size_t>(profile.ops.size(), 1));
  std::vector<TensorFeatures> features(profile.tensors.size());
  for (std::size_t t = 0; t < profile.tensors.size(); ++t) {
    const ProfileTensor& tensor = profile.tensors[t];
    TensorFeatures& f = features[t];
    f.bytes = tensor.bytes;
    f.use_count = static_cast<std::uint32_t>(tensor.uses.size());
    for (std::uint32_t use : tensor.uses) f.token_tag |= 1u << (profile.ops[use].token % 32);
    f.position_hash = kFnv1aOffset;
    if (!tensor.uses.empty()) {
      f.position_hash = Fnv1a(f.position_hash, AnchorWord(anchors[tensor.uses.front()]));
      f.position_hash = Fnv1a(f.position_hash, AnchorWord(anchors[tensor.uses.back()]));
      f.relative_position = tensor.uses.front() / ops;
      double sum = 0;
      for (std::uint32_t use : tensor.uses) sum += use;
      f.mean_position = sum / static_cast<double>(tensor.uses.size()) / ops;
    } else if (tensor.alloc_op >= 0) {
      f.relative_position = tensor.alloc_op / ops;
      f.mean_position = f.relative_position;
    }
    f.match_key = Fnv1a(Fnv1a(Fnv1a(Fnv1a(kFnv1aOffset, f.bytes), f.use_count), f.token_tag),
                        f.position_hash);
  }
  return features;
}

double Similarity(const TensorFeatures& a, const TensorFeatures& b) {
  if (a.bytes != b.bytes) return 0;
  const double distance = std::abs(a.relative_position - b.relative_position) +
                          std::abs(a.mean_position - b.mean_position);
  return 0.3 * (a.use_count == b.use_count) + 0.3 * (a.token_tag == b.token_tag) +
         0.4 * std::max(0.0, 1 - distance / 0.05);
}

Matcher::Matcher(std::vector<TensorFeatures> reference, MatcherOptions options)
    : reference_(std::move(reference)), options_(options) {}

std::vector<std::int32_t> Matcher::Match(const std::vector<TensorFeatures>& current) const {
  std::vector<std::int32_t> match(current.size(), -1);
  // Per size, the order-preserving alignment of highest total similarity (ops inserted
  // elsewhere do not reorder the original tensors). Equal match keys are not trusted on their
  // own: an insertion that shifts a token's occurrences by one gives a tensor exactly its
  // neighbour's reference key.
  const auto by_size = [](const TensorFeatures& f) { return f.bytes; };
  const auto ref_sizes = GroupBy(reference_, by_size);
  for (const auto& group : GroupBy(current, by_size)) {
    // Named, not a structured binding: the lambda below captures it (clang 14, which runs
    // clang-tidy, rejects capturing a binding).
    const auto& members = group.second;
    const auto it = ref_sizes.find(group.first);
    if (it == ref_sizes.end()) continue;
    const std::vector<std::uint32_t>& refs = it->second;
    const auto score = [&](std::size_t i, std::size_t j) {
      return Similarity(current[members[i]], reference_[refs[j]]);
    };
    const std::vector<std::int32_t> aligned = detail::AlignOrdered(
        members.size(), refs.size(), options_.window, score, options_.threshold);
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (aligned[i] >= 0) match[members[i]] = static_cast<std::int32_t>(refs[aligned[i]]);
    }
  }
  return match;
}

}  // namespace chameleon::policy
