#include "chameleon/daemon/lending_metrics.h"

namespace chameleon::daemon {

LendingMetrics::LendingMetrics(prometheus::Registry& r) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  placed_ = &BuildGauge()
                 .Name("chameleon_placement_bytes")
                 .Help("Swap bytes per iteration the last node placement put on each helper")
                 .Register(r);
  active_leases_ = &BuildGauge()
                        .Name("chameleon_leases_active")
                        .Help("Peer-HBM leases held now, active or being revoked")
                        .Register(r)
                        .Add({});
  leased_bytes_ = &BuildGauge()
                       .Name("chameleon_leased_bytes")
                       .Help("Bytes of peer GPUs lent to other clients, active or being revoked")
                       .Register(r)
                       .Add({});
  auto& revocations = BuildCounter()
                          .Name("chameleon_lease_revocations_total")
                          .Help(
                              "Lease revocations by outcome: completed (the lessee moved the "
                              "bytes home in time) or hung (past the deadline)")
                          .Register(r);
  completed_ = &revocations.Add({{"outcome", "completed"}});
  hung_ = &revocations.Add({{"outcome", "hung"}});
  stopped_gpus_ = &BuildGauge()
                       .Name("chameleon_lending_stopped_gpus")
                       .Help(
                           "GPUs that lend no more because a lessee hung on a revocation (until "
                           "another client owns the GPU)")
                       .Register(r)
                       .Add({});
  cost_ = &BuildGauge()
               .Name("chameleon_placement_cost_seconds")
               .Help("GlobalCost of the last node placement: sum of bytes x seconds per byte")
               .Register(r)
               .Add({});
  rounds_ = &BuildCounter()
                 .Name("chameleon_placement_rounds_total")
                 .Help("Node placements computed (rounds whose inputs changed)")
                 .Register(r)
                 .Add({});
}

prometheus::Gauge& LendingMetrics::Helper(const std::string& helper) {
  auto it = helpers_.find(helper);
  if (it == helpers_.end())
    it = helpers_.emplace(helper, &placed_->Add({{"helper", helper}})).first;
  return *it->second;
}

}  // namespace chameleon::daemon
