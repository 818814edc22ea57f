// chameleon-plan: WATOS-style strategy search for LLM training on a wafer-scale chip.
// Exit codes: 0 an answer (also "does not fit"), 1 bad input, 2 usage.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "chameleon/cli/guarded_main.h"
#include "chameleon/topology/topology_yaml.h"
#include "plan_report.h"

namespace {

using namespace chameleon;

plan::ModelSpec ResolveModel(const std::string& name) {
  if (auto preset = plan::ModelPreset(name)) return *preset;
  return plan::LoadModelYaml(name);
}

topology::WaferSpec ResolveWafer(const std::string& name) {
  const std::string prefix = "wafer:";
  if (name.rfind(prefix, 0) == 0) {
    if (auto preset = topology::WaferPreset(name.substr(prefix.size()))) return *preset;
    throw std::runtime_error("unknown wafer preset '" + name +
                             "' (config1, config3, config4; "
                             "Config2 is not public)");
  }
  auto description = topology::LoadTopologyYaml(name);
  if (auto* spec = std::get_if<topology::WaferSpec>(&description)) return *spec;
  throw std::runtime_error(name + ": the planner needs a 'wafer:' topology");
}

std::string CommandLine(int argc, char** argv) {
  std::string out = "chameleon-plan";
  for (int i = 1; i < argc; ++i) out += std::string(" ") + argv[i];
  return out;
}

int Run(int argc, char** argv) {
  CLI::App app{"chameleon-plan: pipeline placement, recomputation and DRAM lending on a wafer"};
  std::string model_name, topology_name = "wafer:config1", svg_path;
  std::uint64_t seed = 1;
  bool json = false;
  plan::PlanOptions options;
  plan::SearchOptions search;
  search.ga.max_generations = 200;
  search.ga.stall_generations = 40;
  app.add_option("--model", model_name,
                 "preset (llama2-30b, llama3-70b, gpt-175b, gshard-137b) "
                 "or a YAML file")
      ->required();
  app.add_option("--topology", topology_name, "wafer:config1|config3|config4 or a YAML file");
  app.add_option("--seed", seed, "search seed");
  app.add_flag("--json", json, "print only the JSON document on stdout");
  app.add_option("--svg", svg_path, "write a heat map of the wafer to this file");
  app.add_option("--dies-per-stage", options.dies_per_stage, "tensor-parallel dies per stage");
  app.add_option("--mfu", options.mfu, "achieved fraction of peak FLOP/s (default 0.5)");
  app.add_option("--generations", search.ga.max_generations, "GA generations (default 200)");
  app.add_option("--population", search.ga.population, "GA population (default 32)");
  CLI11_PARSE(app, argc, argv);
  search.ga.seed = seed;
  // A bad model or topology file throws: GuardedMain (main) reports it, status 1.
  const plan::PlanProblem problem =
      plan::MakeProblem(ResolveWafer(topology_name), ResolveModel(model_name), options);
  const plan::PlanEvaluator evaluator(problem);
  const plan::SearchResult result = plan::SearchPlan(evaluator, search);
  const plan::PlanEvaluation baseline =
      evaluator.Evaluate(plan::MegatronBaseline(evaluator), result.t_ref);
  const plan::PlanReport report{problem, result, baseline, CommandLine(argc, argv), seed};
  if (!svg_path.empty()) {
    std::ofstream(svg_path) << plan::PlanSvg(problem, result.evaluation);
  }
  std::cout << (json ? plan::PlanJson(report).dump(2) + "\n" : plan::PlanText(report));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return chameleon::cli::GuardedMain("chameleon-plan", [&] { return Run(argc, argv); });
}
