// ClientSession::Describe: what chameleonctl shows about a client.
#include <nlohmann/json.hpp>

#include <cstring>
#include <string>
#include <string_view>

#include "chameleon/daemon/client_session.h"
#include "chameleon/ipc/executor_counters.h"

namespace chameleon::daemon {
namespace {

nlohmann::json PolicyJson(std::uint64_t generation, const ipc::Policy& policy, double measured_s) {
  return {{"generation", generation},
          {"swaps", policy.entries.size()},
          {"predicted_iteration_s", policy.summary.predicted_iteration_s},
          {"predicted_stall_s", policy.summary.predicted_stall_s},
          {"predicted_peak_bytes", policy.summary.predicted_peak_bytes},
          {"measured_iteration_s", measured_s}};
}

/// The executor's counters as the shim last published them (SegmentHeader slots 5 and 7): every
/// row of executor_counters.inc with a JSON key, "group.key" nested, scaled values as numbers.
nlohmann::json SwapJson(const ipc::SegmentHeader& h) {
  nlohmann::json out = nlohmann::json::object();
  for (const ipc::ExecutorCounter& row : ipc::kExecutorCounters) {
    if (!row.published() || row.json[0] == '\0') continue;
    const std::string_view key = row.json;
    const std::size_t dot = key.find('.');
    nlohmann::json& parent =
        dot == std::string_view::npos ? out : out[std::string(key.substr(0, dot))];
    const std::string leaf(dot == std::string_view::npos ? key : key.substr(dot + 1));
    const std::uint64_t v = row.Load(h);
    if (row.scale == 1) {
      parent[leaf] = v;
    } else {
      parent[leaf] = double(v) * row.scale;
    }
  }
  return out;
}

}  // namespace

nlohmann::json ClientSession::InForceJson(std::uint64_t applied) const {
  // The policy the shim applies: a GEN_POLICY candidate, or the chosen one republished in STABLE
  // under its own generation. Measured = the last iteration's device time.
  const ipc::Policy* policy = nullptr;
  for (const Candidate& c : candidates_) {
    if (c.generation == applied) policy = &c.policy;
  }
  if (policy == nullptr && chosen_ && chosen_generation_ != 0 && applied == chosen_generation_)
    policy = &chosen_->policy;
  nlohmann::json j{{"generation", applied}, {"measured_iteration_s", iteration_s_}};
  j["predicted_iteration_s"] =
      policy != nullptr ? nlohmann::json(policy->summary.predicted_iteration_s) : nullptr;
  j["swaps"] = policy != nullptr ? nlohmann::json(policy->entries.size()) : nullptr;
  return j;
}

void ClientSession::Describe(bool detailed, nlohmann::json* out) const {
  const ipc::SegmentHeader* h = segment_.header();
  nlohmann::json& j = *out;
  j["id"] = identity_.id;
  j["slot"] = identity_.slot;
  j["pid"] = identity_.pid;
  j["uid"] = identity_.uid;
  j["stage"] = StageName(stage());
  j["iteration_ops"] = iteration_ops();
  j["iteration_s"] = iteration_s_;
  j["iterations"] = iterations();
  j["shifts"] = shifts();
  j["generation"] = generation_;
  j["disabled"] = disabled_;
  if (!detailed) return;
  nlohmann::json signature = nlohmann::json::array(), names = nlohmann::json::array();
  for (std::uint32_t token : boundary()) {
    signature.push_back(token);
    auto it = names_.find(token);
    names.push_back(it != names_.end() ? it->second : "token " + std::to_string(token));
  }
  j["boundary"] = {{"signature", signature},
                   {"names", names},
                   {"period_ops", boundary_period_},
                   {"source", pattern_boundary_ ? "pattern" : (tracker_ ? "detected" : "none")},
                   {"losses", boundary_losses_},
                   {"history_ops", history_.size()}};
  nlohmann::json shift_log = nlohmann::json::array();
  if (tracker_) {
    for (std::uint64_t index : tracker_->shift_log()) shift_log.push_back(index);
    j["discarded_iterations"] = tracker_->discarded();
  }
  j["shift_iterations"] = shift_log;
  j["stable_at_iteration"] = tracker_ ? tracker_->first_stable_iteration() : 0;
  // GEN_POLICY steps beyond stage_n while candidates were measured (docs/detection.md §4).
  j["stage_hold_steps"] = tracker_ ? tracker_->held_steps() : 0;
  j["stage_hold"] = stage_hold_;
  j["records"] = {{"drained", drained_},
                  {"ops", ops_},
                  {"written", h->records_written.load(std::memory_order_relaxed)},
                  {"dropped", h->records_dropped.load(std::memory_order_relaxed)},
                  {"repaired", ring_.repaired()},
                  {"unknown", unknown_records_},
                  {"iteration_marks", marks_}};
  j["device"] = {{"bytes_live", h->device_bytes_live.load(std::memory_order_relaxed)},
                 {"bytes_peak", h->device_bytes_peak.load(std::memory_order_relaxed)},
                 {"limit_bytes", DeviceLimit()}};
  j["swap"] = SwapJson(*h);
  nlohmann::json candidates = nlohmann::json::array();
  for (const Candidate& c : candidates_)
    candidates.push_back(PolicyJson(c.generation, c.policy, c.measured_s));
  j["policy"] = {
      {"generation", generation_},
      {"applied_generation", h->policy_generation_applied.load(std::memory_order_relaxed)},
      {"candidates", candidates},
      {"chosen", chosen_ ? PolicyJson(chosen_->generation, chosen_->policy, chosen_->measured_s)
                         : nlohmann::json(nullptr)},
      {"in_force", InForceJson(h->policy_generation_applied.load(std::memory_order_relaxed))},
      {"error", generation_error_},
      {"refused_too_large", publish_refused_}};
  j["pointer_targets"] = ExclusionsJson();
  j["profile"] = profile_ ? nlohmann::json{{"ops", profile_->ops.size()},
                                           {"tensors", profile_->tensors.size()},
                                           {"iteration_s", profile_->iteration_s},
                                           {"fresh", profile_fresh_},
                                           {"clock", profile_clock_}}
                          : nlohmann::json(nullptr);
  nlohmann::json devices = nlohmann::json::array();
  for (const ipc::DeviceFacts& d : identity_.hello.devices) {
    devices.push_back(
        {{"ordinal", d.ordinal},
         {"total_memory", d.total_memory},
         {"numa_node", d.host_numa_node},
         {"pci_bus_id", std::string(d.pci_bus_id, strnlen(d.pci_bus_id, sizeof(d.pci_bus_id)))}});
  }
  j["devices"] = devices;
}

}  // namespace chameleon::daemon
