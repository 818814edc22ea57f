// chameleon-probe's two outputs from the same figures: a table for people and a SIMGPU_TOPOLOGY
// YAML (docs/simgpu.md keys) that makes simgpu model the probed machine. Pure functions.
#pragma once

#include <string>

#include "figures.h"

namespace chameleon::probe {

std::string FormatTable(const ProbeFigures& f);

/// host_to_device_bandwidth / device_to_host_bandwidth: the median over the measured devices of
/// each device's figure against its own NUMA node (the first node when it has none);
/// host_link_bandwidth: the smaller of the two (for simgpu builds that model one figure);
/// peer_links: one directed entry per measured pair with peer access; numa_nodes when known.
std::string FormatYaml(const ProbeFigures& f);

}  // namespace chameleon::probe
