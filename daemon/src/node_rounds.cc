// Node placement on the loop: each housekeeping tick gathers every client's view, lets
// NodeLending settle revocations and place new demand, and republishes the policies that changed.
// Cheap when nothing changed: the placement itself reruns only when its inputs do.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "daemon_impl.h"

namespace chameleon::daemon {

std::string TopologyOverrideText() {
  const char* path = std::getenv("CHAMELEON_TOPOLOGY");
  if (path == nullptr || *path == '\0') return {};
  std::ifstream in(path);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) {
    spdlog::warn("CHAMELEON_TOPOLOGY {}: unreadable; node placement uses the reported figures",
                 path);
    return {};
  }
  return text.str();
}

void DaemonImpl::RunNodeRound(std::uint64_t now_ns) {
  std::vector<NodeClient> views;
  views.reserve(clients_.size());
  for (const auto& [id, conn] : clients_) views.push_back(conn->session->NodeView());
  RepublishClients(node_.Round(now_ns, views, options_.lending));
}

void DaemonImpl::RepublishClients(const std::vector<std::uint32_t>& ids) {
  for (std::uint32_t id : ids) {
    if (Connection* conn = FindClient(id); conn != nullptr && conn->session) {
      conn->session->Republish();
    }
  }
}

}  // namespace chameleon::daemon
