// chameleonctl topology: the text view of the daemon's node view (its "topology" JSON).
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

namespace chameleon::ctl {

/// Prints the places (capacity, NUMA node, peers), the links with the bandwidth each way, the
/// hop and bandwidth tables between places (by place number), where each figure came from, and
/// any warnings and clients left out. Fields the daemon did not send print as "-".
void PrintTopology(std::ostream& out, const nlohmann::json& topology);

}  // namespace chameleon::ctl
