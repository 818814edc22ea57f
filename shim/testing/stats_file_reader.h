// Reads a CHAMELEON_STATS_FILE (docs/shim.md, "Stats file") back for tests: the structured
// source of the executor's results, instead of the wording of its log. Header-only; not
// thread-safe (plain functions over a file nobody writes any more).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chameleon::shim::testing {

/// One line of the file.
struct StatsRecord {
  std::string event;  ///< "iteration" or "exit"
  std::uint64_t pid = 0;
  std::uint64_t iteration = 0;                    ///< iterations closed so far (this one included)
  std::uint64_t generation_in_force = 0;          ///< policy generation during the span it covers
  std::uint64_t limit = 0;                        ///< device limit in force
  std::map<std::string, std::uint64_t> counters;  ///< the span's deltas (gauges: their level)
  std::map<std::string, std::uint64_t> totals;    ///< cumulative values (gauges: their level)
};

/// Every record of `path` in file order; empty when the file is missing. A line that is not a
/// record is returned with event "malformed" so that a test comparing events sees it.
inline std::vector<StatsRecord> ReadStatsFile(const std::string& path) {
  std::vector<StatsRecord> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    StatsRecord r;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("event") || !j["counters"].is_object() ||
        !j["totals"].is_object()) {
      r.event = "malformed";
      records.push_back(r);
      continue;
    }
    r.event = j["event"].get<std::string>();
    r.pid = j.value("pid", std::uint64_t{0});
    r.iteration = j.value("iteration", std::uint64_t{0});
    r.generation_in_force = j.value("generation_in_force", std::uint64_t{0});
    r.limit = j.value("limit", std::uint64_t{0});
    for (const auto& [k, v] : j["counters"].items()) r.counters[k] = v.get<std::uint64_t>();
    for (const auto& [k, v] : j["totals"].items()) r.totals[k] = v.get<std::uint64_t>();
    records.push_back(r);
  }
  return records;
}

/// The last "exit" record, if any.
inline std::optional<StatsRecord> ExitRecord(const std::vector<StatsRecord>& records) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (it->event == "exit") return *it;
  }
  return std::nullopt;
}

/// The "iteration" records, in order.
inline std::vector<StatsRecord> IterationRecords(const std::vector<StatsRecord>& records) {
  std::vector<StatsRecord> out;
  for (const StatsRecord& r : records) {
    if (r.event == "iteration") out.push_back(r);
  }
  return out;
}

/// What the CHAMELEON_DEBUG=stats exit line said as a map: "limit" and every counter's total
/// (empty without an exit record).
inline std::map<std::string, std::uint64_t> ExitTotals(const std::vector<StatsRecord>& records) {
  const std::optional<StatsRecord> exit = ExitRecord(records);
  if (!exit) return {};
  std::map<std::string, std::uint64_t> out = exit->totals;
  out["limit"] = exit->limit;
  return out;
}

}  // namespace chameleon::shim::testing
