// ClientSession::Describe: what chameleonctl shows about a client.
#include <nlohmann/json.hpp>

#include <cstring>
#include <string>
#include <string_view>

#include "chameleon/daemon/client_session.h"
#include "chameleon/ipc/executor_counters.h"

namespace chameleon::daemon {
namespace {

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

void ClientSession::Describe(bool detailed, nlohmann::json* out) const {
  const ipc::SegmentHeader* h = segment_.header();
  nlohmann::json& j = *out;
  j["id"] = identity_.id;
  j["slot"] = identity_.slot;
  j["pid"] = identity_.pid;
  j["uid"] = identity_.uid;
  j["stage"] = StageName(stage());
  const IterationTracker* tracker = loop_.tracker();
  j["iteration_ops"] = tracker ? tracker->iteration_ops() : 0;
  j["iteration_s"] = clock_.iteration_s();
  j["iterations"] = loop_.iterations();
  j["shifts"] = loop_.shifts();
  j["generation"] = publisher_.generation();
  j["disabled"] = disabled_;
  if (!detailed) return;
  nlohmann::json signature = nlohmann::json::array(), names = nlohmann::json::array();
  if (tracker) {
    for (std::uint32_t token : tracker->signature()) {
      signature.push_back(token);
      auto it = names_.find(token);
      names.push_back(it != names_.end() ? it->second : "token " + std::to_string(token));
    }
  }
  j["boundary"] = {{"signature", signature},
                   {"names", names},
                   {"period_ops", loop_.period()},
                   {"source", loop_.pattern() ? "pattern" : (tracker ? "detected" : "none")},
                   {"losses", loop_.losses()},
                   {"replaced", loop_.replaced()},
                   {"pending", loop_.pending()},
                   {"rejected", loop_.rejected()},
                   {"history_ops", loop_.history_ops()},
                   {"found_at_iteration", loop_.found_at_iteration()}};
  nlohmann::json shift_log = nlohmann::json::array();
  if (tracker) {
    for (std::uint64_t index : tracker->shift_log()) shift_log.push_back(index);
    j["discarded_iterations"] = tracker->discarded();
  }
  j["shift_iterations"] = shift_log;
  nlohmann::json stable_log = nlohmann::json::array();
  if (tracker) {
    for (std::uint64_t index : tracker->stable_log()) stable_log.push_back(index);
  }
  j["stable_iterations"] = stable_log;
  j["stable_at_iteration"] = tracker ? tracker->first_stable_iteration() : 0;
  // GEN_POLICY steps beyond stage_n while candidates were measured (docs/detection.md §4).
  j["stage_hold_steps"] = tracker ? tracker->held_steps() : 0;
  j["stage_hold"] = hold_.held();
  j["records"] = {{"drained", drained_},
                  {"ops", ops_},
                  {"written", h->records_written.load(std::memory_order_relaxed)},
                  {"dropped", h->records_dropped.load(std::memory_order_relaxed)},
                  {"repaired", ring_.repaired()},
                  {"unknown", unknown_records_},
                  {"iteration_marks", clock_.marks()}};
  j["device"] = {{"bytes_live", h->device_bytes_live.load(std::memory_order_relaxed)},
                 {"bytes_peak", h->device_bytes_peak.load(std::memory_order_relaxed)},
                 {"limit_bytes", DeviceLimit()}};
  // The link its plans assume, per direction, and where the figures came from.
  const policy::GeneratorOptions link = WithHostLink(options_.policy);
  j["host_link"] = {{"device_to_host_bytes_per_s", policy::OutBandwidth(link)},
                    {"host_to_device_bytes_per_s", policy::InBandwidth(link)},
                    {"source", host_link_ && (options_.policy.device_to_host_bytes_per_s == 0 ||
                                              options_.policy.host_to_device_bytes_per_s == 0)
                                   ? "topology"
                                   : "config"}};
  j["swap"] = SwapJson(*h);
  const std::uint64_t applied = h->policy_generation_applied.load(std::memory_order_relaxed);
  nlohmann::json policy{{"generation", publisher_.generation()},
                        {"applied_generation", applied},
                        {"refused_too_large", publisher_.refused()}};
  trials_.Describe(applied, clock_.iteration_s(), &policy);
  // The reserve its plans keep free, as ReserveFeedback raised it (docs/policy.md, "Reserve").
  policy["reserve"] = {{"bytes", last_reserve_bytes_},
                       {"level", feedback_.level()},
                       {"feedback", options_.reserve_feedback},
                       {"watched_generation", feedback_.watched()}};
  // Plans chosen per op sequence, recalled when a sequence comes back (PlanMemory).
  policy["remembered"] = {
      {"plans", plans_.size()},           {"in_progress", plans_.in_progress()},
      {"capacity", plans_.capacity()},    {"recalls", plans_.recalls()},
      {"resumes", plans_.resumes()},      {"variants", variant_plans_},
      {"predicted", predicted_switches_}, {"predicted_missed", predicted_misses_}};
  j["policy"] = policy;
  j["pointer_targets"] = exclusions_.Json();
  j["planned_device"] = device_view_.Json();
  const auto& profile = recorder_.profile();
  j["profile"] = profile ? nlohmann::json{{"ops", profile->ops.size()},
                                          {"tensors", profile->tensors.size()},
                                          {"iteration_s", profile->iteration_s},
                                          {"fresh", recorder_.fresh()},
                                          {"clock", recorder_.clock()}}
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
