#include "chameleon/policy/options.h"

#include <array>

namespace chameleon::policy {

std::vector<GeneratorOptions> CandidateConfigs(const GeneratorOptions& base, std::uint32_t count) {
  // Size weights around the paper's 0.7: lower favours tensors idle across many MRL entries,
  // higher favours big tensors (fewer, larger copies). Margins trade stall risk for fit.
  static constexpr std::array<double, 4> kWeightScale = {1.0, 0.4, 2.0, 0.0};
  static constexpr std::array<double, 3> kMargins = {0.0, 0.1, 0.3};
  std::vector<GeneratorOptions> configs;
  configs.reserve(count);
  if (count == 0) return configs;
  configs.push_back(base);
  for (std::size_t m = 0; m < kMargins.size() && configs.size() < count; ++m) {
    for (std::size_t w = 0; w < kWeightScale.size() && configs.size() < count; ++w) {
      GeneratorOptions option = base;
      option.size_weight = base.size_weight * kWeightScale[w];
      if (kWeightScale[w] == 0.0 && base.size_weight == 0.0) option.size_weight = 0.7;
      option.prefetch_margin = base.prefetch_margin + kMargins[m];
      if (option.size_weight == base.size_weight &&
          option.prefetch_margin == base.prefetch_margin) {
        continue;  // the base is already first
      }
      configs.push_back(option);
    }
  }
  return configs;
}

}  // namespace chameleon::policy
