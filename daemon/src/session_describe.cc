// ClientSession::Describe: what chameleonctl shows about a client.
#include <nlohmann/json.hpp>

#include <cstring>

#include "chameleon/daemon/client_session.h"

namespace chameleon::daemon {
namespace {

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
                   {"history_ops", loop_.history_ops()}};
  nlohmann::json shift_log = nlohmann::json::array();
  if (tracker) {
    for (std::uint64_t index : tracker->shift_log()) shift_log.push_back(index);
    j["discarded_iterations"] = tracker->discarded();
  }
  j["shift_iterations"] = shift_log;
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
  j["swap"] = SwapJson(*h);
  const std::uint64_t applied = h->policy_generation_applied.load(std::memory_order_relaxed);
  nlohmann::json policy{{"generation", publisher_.generation()},
                        {"applied_generation", applied},
                        {"refused_too_large", publisher_.refused()}};
  trials_.Describe(applied, clock_.iteration_s(), &policy);
  j["policy"] = policy;
  j["pointer_targets"] = exclusions_.Json();
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
