#include "chameleon/policy/candidates.h"

#include <algorithm>

namespace chameleon::policy {
namespace {

void Score(std::vector<Candidate>* candidates, double size_weight) {
  std::uint32_t max_mre = 1;
  std::uint64_t max_bytes = 1;
  for (const Candidate& c : *candidates) {
    max_mre = std::max(max_mre, c.mre_count);
    max_bytes = std::max(max_bytes, c.bytes);
  }
  for (Candidate& c : *candidates) {
    c.score = static_cast<double>(c.mre_count) / max_mre +
              size_weight * static_cast<double>(c.bytes) / static_cast<double>(max_bytes);
  }
}

bool Better(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.bytes != b.bytes) return a.bytes > b.bytes;
  if (a.last_use_op != b.last_use_op) return a.last_use_op < b.last_use_op;
  return a.tensor < b.tensor;
}

// A tensor that lives across iterations (parameters, optimizer state) is idle from its last use
// to its first use in the next iteration. That gap is written in the coordinates of two
// iterations back to back: next_use_op = first use + ops.
void AddWrapped(const ProfileTensor& tensor, std::size_t t, const LayerGrid& grid,
                const std::vector<std::uint32_t>& mre_prefix, std::uint64_t device_bytes,
                std::uint32_t min_layers, std::vector<Candidate>* out) {
  if (tensor.alloc_op >= 0 || tensor.free_op >= 0 || tensor.uses.empty()) return;
  const auto ops = static_cast<std::uint32_t>(grid.layer_of_op.size());
  const auto layers = static_cast<std::uint32_t>(grid.layers.size());
  const std::uint32_t last = tensor.uses.back();
  const std::uint32_t first = tensor.uses.front();
  if (grid.layer_of_op[first] + layers < grid.layer_of_op[last] + min_layers) return;
  const std::uint32_t mres = (mre_prefix[ops] - mre_prefix[last + 1]) + mre_prefix[first];
  if (mres == 0) return;
  out->push_back(
      {static_cast<std::uint32_t>(t), last, first + ops, tensor.bytes, mres, 0, device_bytes});
}

}  // namespace

std::vector<Candidate> FindCandidates(const Profile& profile, const LayerGrid& grid,
                                      const std::vector<std::uint32_t>& mre_prefix,
                                      const GeneratorOptions& options, GapRule rule) {
  // Two layers: the bytes can be off the device only strictly between the layer the swap-out
  // ends in and the layer the swap-in starts in. Any length: one op between the uses (an MRL
  // entry, below) is all the executor's accounting needs; the simulator charges the stalls.
  const std::uint32_t min_layers = rule == GapRule::kTwoLayers ? 2 : 0;
  std::vector<Candidate> candidates;
  for (std::size_t t = 0; t < profile.tensors.size(); ++t) {
    const ProfileTensor& tensor = profile.tensors[t];
    if (!tensor.swappable || tensor.bytes == 0 || tensor.bytes < options.min_swap_bytes) {
      continue;
    }
    const std::uint64_t device_bytes =
        DeviceBytes(tensor, options.chunk_bytes, options.min_swap_bytes);
    for (std::size_t k = 1; k < tensor.uses.size(); ++k) {
      const std::uint32_t last = tensor.uses[k - 1];
      const std::uint32_t next = tensor.uses[k];
      if (grid.layer_of_op[next] < grid.layer_of_op[last] + min_layers) continue;
      const std::uint32_t mres = mre_prefix[next] - mre_prefix[last + 1];
      if (mres == 0) continue;
      candidates.push_back(
          {static_cast<std::uint32_t>(t), last, next, tensor.bytes, mres, 0, device_bytes});
    }
    if (options.cross_iteration) {
      AddWrapped(tensor, t, grid, mre_prefix, device_bytes, min_layers, &candidates);
    }
  }
  Score(&candidates, options.size_weight);
  std::sort(candidates.begin(), candidates.end(), Better);
  return candidates;
}

}  // namespace chameleon::policy
