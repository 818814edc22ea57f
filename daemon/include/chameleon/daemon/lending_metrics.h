// The node-placement and lease metrics (docs/metrics.md "Node placement"): families registered
// once at construction; the per-helper series are added when a helper is first seen and kept
// (a node has a few GPUs and NUMA nodes, so the series stay bounded). Thread-safe for updates
// (prometheus-cpp metrics are atomic); Helper() only on the loop thread.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

namespace chameleon::daemon {

class LendingMetrics {
 public:
  explicit LendingMetrics(prometheus::Registry& registry);

  /// chameleon_placement_bytes{helper}: bytes the last placement put on `helper` ("gpu
  /// <bus id>" or "numa <id>").
  prometheus::Gauge& Helper(const std::string& helper);
  prometheus::Gauge& active_leases() { return *active_leases_; }
  prometheus::Gauge& leased_bytes() { return *leased_bytes_; }
  prometheus::Counter& completed() { return *completed_; }
  prometheus::Counter& hung() { return *hung_; }
  prometheus::Gauge& stopped_gpus() { return *stopped_gpus_; }
  prometheus::Gauge& cost() { return *cost_; }
  prometheus::Counter& rounds() { return *rounds_; }

 private:
  prometheus::Family<prometheus::Gauge>* placed_;
  std::map<std::string, prometheus::Gauge*> helpers_;
  prometheus::Gauge* active_leases_;
  prometheus::Gauge* leased_bytes_;
  prometheus::Counter* completed_;
  prometheus::Counter* hung_;
  prometheus::Gauge* stopped_gpus_;
  prometheus::Gauge* cost_;
  prometheus::Counter* rounds_;
};

}  // namespace chameleon::daemon
