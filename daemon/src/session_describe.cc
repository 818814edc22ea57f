// ClientSession::Describe: what chameleonctl shows about a client.
#include <nlohmann/json.hpp>

#include <cstring>

#include "chameleon/daemon/client_session.h"

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

/// The executor's counters as the shim last published them (SegmentHeader slots 5 and 7).
nlohmann::json SwapJson(const ipc::SegmentHeader& h) {
  auto load = [](const std::atomic<std::uint64_t>& f) { return f.load(std::memory_order_relaxed); };
  return {{"out_bytes", load(h.swap_out_bytes)},
          {"in_bytes", load(h.swap_in_bytes)},
          {"stalls", load(h.stall_count)},
          {"stall_s", double(load(h.stall_ns)) * 1e-9},
          {"prefetch_hits", load(h.prefetch_hits)},
          {"prefetch_misses", load(h.prefetch_misses)},
          {"host_pool_bytes", load(h.host_pool_bytes)},
          {"vmm_calls", load(h.vmm_calls)},
          {"fault_ins", load(h.fault_ins)},
          {"evictions", load(h.evictions)},
          {"policy_ignored", load(h.policy_ignored)},
          {"iterations", load(h.executor_iterations)},
          {"last_iteration",
           {{"vmm_calls", load(h.last_iteration_vmm_calls)},
            {"out_bytes", load(h.last_iteration_swap_out_bytes)},
            {"in_bytes", load(h.last_iteration_swap_in_bytes)}}}};
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
