// Routes transfers on a wafer mesh over shortest (Manhattan) paths that avoid loaded links, and
// keeps each directed link's load. Not thread-safe: one per plan evaluation.
#pragma once

#include <vector>

#include "chameleon/topology/topology.h"
#include "chameleon/topology/wafer.h"

namespace chameleon::plan {

class MeshRouter {
 public:
  MeshRouter(const topology::WaferSpec& spec, const topology::Topology& topo);

  /// Among all minimal paths from `from` to `to`, the one whose most loaded link carries the
  /// least (then the least total load, then x before y); adds `bytes` to each of its links and
  /// returns its link indices.
  std::vector<int> RouteAvoidingLoad(int from, int to, double bytes);
  /// Adds `bytes` along an already chosen list of links.
  void AddLoad(const std::vector<int>& links, double bytes);
  /// Bytes on each directed link so far (indexed like Topology::links()).
  const std::vector<double>& load() const { return load_; }

 private:
  const topology::WaferSpec& spec_;
  const topology::Topology& topo_;
  std::vector<double> load_;
};

}  // namespace chameleon::plan
