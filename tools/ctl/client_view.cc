#include "client_view.h"

#include <cstdio>
#include <string>
#include <vector>

#include "chameleon/ipc/executor_counters.h"
#include "table.h"

namespace chameleon::ctl {
namespace {

using nlohmann::json;

/// `object[key]`, or null when either is missing (an older daemon sends fewer fields).
json Field(const json& object, const char* key) {
  return object.is_object() && object.contains(key) ? object[key] : json(nullptr);
}

/// The executor's counters: one row per counter with a label in executor_counters.inc, its total
/// and, where the table has a "last_iteration.<key>" row for the same key, its value in the last
/// iteration.
void PrintSwap(std::ostream& out, const json& swap) {
  const json last = Field(swap, "last_iteration");
  std::vector<std::vector<std::string>> table{{"  SWAP", "TOTAL", "LAST_ITERATION"}};
  for (const ipc::ExecutorCounter& row : ipc::kExecutorCounters) {
    if (row.view[0] == '\0') continue;
    const std::string key = row.json;
    const bool has_last = ipc::ExecutorCounterIndexByJson(("last_iteration." + key).c_str()) <
                          ipc::kExecutorCounterCount;
    table.push_back({std::string("  ") + row.view, Cell(Field(swap, key.c_str())),
                     has_last ? Cell(Field(last, key.c_str())) : ""});
  }
  PrintTable(out, table);
}

/// "policy in force: generation G (N swaps), predicted P s, measured M s (+x %)".
void PrintInForce(std::ostream& out, const json& in_force) {
  if (!in_force.is_object()) return;
  const json predicted = Field(in_force, "predicted_iteration_s");
  const json measured = Field(in_force, "measured_iteration_s");
  out << "policy in force: generation " << Cell(Field(in_force, "generation")) << " ("
      << Cell(Field(in_force, "swaps")) << " swaps), predicted " << Cell(predicted)
      << " s, measured " << Cell(measured) << " s";
  if (predicted.is_number() && measured.is_number() && predicted.get<double>() > 0) {
    char delta[32];
    std::snprintf(delta, sizeof(delta), " (%+.1f %%)",
                  (measured.get<double>() / predicted.get<double>() - 1) * 100);
    out << delta;
  }
  out << '\n';
}

void PrintCandidates(std::ostream& out, const json& candidates) {
  if (!candidates.is_array() || candidates.empty()) return;
  out << "candidates:\n";
  std::vector<std::vector<std::string>> rows{{"  GENERATION", "SWAPS", "PREDICTED_S", "MEASURED_S",
                                              "PREDICTED_STALL_S", "PREDICTED_PEAK"}};
  for (const json& c : candidates) {
    rows.push_back({"  " + Cell(Field(c, "generation")), Cell(Field(c, "swaps")),
                    Cell(Field(c, "predicted_iteration_s")), Cell(Field(c, "measured_iteration_s")),
                    Cell(Field(c, "predicted_stall_s")), Cell(Field(c, "predicted_peak_bytes"))});
  }
  PrintTable(out, rows);
}

}  // namespace

void PrintClient(std::ostream& out, const json& client) {
  json summary = client;
  const json swap = Field(client, "swap");
  const json policy = Field(client, "policy");
  summary.erase("swap");
  if (summary.contains("policy") && summary["policy"].is_object()) {
    summary["policy"].erase("candidates");
    summary["policy"].erase("in_force");
  }
  PrintObject(out, summary);
  if (swap.is_object()) {
    out << "swap:\n";
    PrintSwap(out, swap);
  }
  PrintInForce(out, Field(policy, "in_force"));
  PrintCandidates(out, Field(policy, "candidates"));
}

}  // namespace chameleon::ctl
