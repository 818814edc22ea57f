// Renders a searched plan: the JSON document (`--json`), the text table, and the SVG heat map
// of the wafer (die DRAM use, link load). Pure: values in, strings out; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan_search.h"

namespace chameleon::plan {

/// Links above this utilisation are flagged, like the seed's link_util report.
inline constexpr double kCongestedLink = 0.9;

struct PlanReport {
  const PlanProblem& problem;
  const SearchResult& search;
  const PlanEvaluation& baseline;  ///< Megatron-style in-order plan
  std::string command;             ///< the command line that reproduces it
  std::uint64_t seed = 0;
};

nlohmann::json PlanJson(const PlanReport& r);
std::string PlanText(const PlanReport& r);
std::string PlanSvg(const PlanProblem& problem, const PlanEvaluation& e);

}  // namespace chameleon::plan
