// The node view as `chameleonctl topology` receives it: places with capacities, links with the
// bandwidth each way, the route table (hops, bottleneck bandwidth, seconds per byte), where each
// figure came from, and the clients left out. Pure function; thread-safe on a const view.
#pragma once

#include <nlohmann/json.hpp>

#include "chameleon/daemon/node_view.h"

namespace chameleon::daemon {

/// The reply's "topology" object (docs/topology.md lists its fields).
nlohmann::json NodeViewToJson(const NodeView& view);

}  // namespace chameleon::daemon
