#include "chameleon/policy/layers.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace chameleon::policy {
namespace {

struct Run {
  std::uint32_t begin;
  std::uint32_t length;
  Phase phase;
};

std::vector<Run> PhaseRuns(const std::vector<Phase>& phases) {
  std::vector<Run> runs;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    if (runs.empty() || runs.back().phase != phases[i]) {
      runs.push_back({static_cast<std::uint32_t>(i), 0, phases[i]});
    }
    ++runs.back().length;
  }
  return runs;
}

}  // namespace

LayerGrid BuildLayers(const std::vector<Phase>& phases, const std::vector<double>& op_s,
                      std::uint32_t layers_per_phase) {
  LayerGrid grid;
  grid.layer_of_op.resize(phases.size());
  if (phases.empty()) return grid;
  const std::vector<Run> runs = PhaseRuns(phases);
  std::array<std::uint64_t, 4> phase_ops{};
  for (const Run& run : runs) phase_ops[static_cast<std::size_t>(run.phase) & 3] += run.length;
  const std::uint32_t per_phase = std::max<std::uint32_t>(layers_per_phase, 1);
  for (const Run& run : runs) {
    // A phase split into several runs shares its layer budget in proportion to run length.
    const double share = static_cast<double>(per_phase) * run.length /
                         static_cast<double>(phase_ops[static_cast<std::size_t>(run.phase) & 3]);
    const auto groups = static_cast<std::uint32_t>(
        std::clamp<double>(std::round(share), 1.0, static_cast<double>(run.length)));
    for (std::uint32_t g = 0; g < groups; ++g) {
      // Equal-size groups: boundaries at floor(g · length / groups).
      const auto first =
          run.begin + static_cast<std::uint32_t>(std::uint64_t{g} * run.length / groups);
      const auto end =
          run.begin + static_cast<std::uint32_t>(std::uint64_t{g + 1} * run.length / groups);
      LogicalLayer layer{first, end - 1, run.phase, 0.0};
      for (std::uint32_t op = first; op < end; ++op) {
        grid.layer_of_op[op] = static_cast<std::uint32_t>(grid.layers.size());
        layer.time_s += op < op_s.size() ? op_s[op] : 0.0;
      }
      grid.layers.push_back(layer);
    }
  }
  return grid;
}

}  // namespace chameleon::policy
