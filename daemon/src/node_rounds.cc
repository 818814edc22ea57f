// Node placement on the loop: each housekeeping tick gathers every client's view, lets
// NodeLending settle revocations and place new demand, and republishes the policies that changed.
// Cheap when nothing changed: the placement itself reruns only when its inputs do.
#include "daemon_impl.h"

namespace chameleon::daemon {

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
