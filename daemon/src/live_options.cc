// Daemon::UpdateOptions: a new set of options applied to the running daemon on its loop thread.
// The sessions hold a reference to options_, so assigning it on the loop thread is all most
// settings need; the rest (timers, the trackers' thresholds, the candidate configurations,
// boundary patterns) are pushed here. docs/operations.md has the per-key table.
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "daemon_impl.h"

namespace chameleon::daemon {
namespace {

/// Restores one restart-only field of `next` to its running value, noting `key` if it differed.
template <typename T>
void Keep(T DaemonOptions::*field, const char* key, const DaemonOptions& running,
          DaemonOptions* next, std::vector<std::string>* kept) {
  if (next->*field != running.*field) kept->push_back(key);
  next->*field = running.*field;
}

}  // namespace

void DaemonImpl::StartUpdates() {
  uv_async_init(&loop_, &update_async_,
                [](uv_async_t* h) { static_cast<DaemonImpl*>(h->data)->OnOptionsUpdate(); });
  update_async_.data = this;
  std::lock_guard<std::mutex> lock(update_mu_);
  updates_open_ = true;
}

void DaemonImpl::CloseUpdates() {
  std::lock_guard<std::mutex> lock(update_mu_);
  updates_open_ = false;
  pending_options_.reset();
}

bool DaemonImpl::UpdateOptions(DaemonOptions next) {
  // Under the lock so the handle cannot be closed between the check and the send.
  std::lock_guard<std::mutex> lock(update_mu_);
  if (!updates_open_) return false;
  pending_options_ = std::move(next);  // a newer update replaces one not yet applied
  uv_async_send(&update_async_);
  return true;
}

void DaemonImpl::KeepRestartOnlyOptions(DaemonOptions* next) const {
  // What the socket, the metrics endpoint and the slot table were built with cannot change
  // under them: the old values stay, said once per update in the config file's key names.
  std::vector<std::string> kept;
  Keep(&DaemonOptions::socket_path, "socket.path", options_, next, &kept);
  Keep(&DaemonOptions::socket_mode, "socket.mode", options_, next, &kept);
  Keep(&DaemonOptions::metrics_listen, "metrics.listen", options_, next, &kept);
  Keep(&DaemonOptions::max_clients, "clients.max", options_, next, &kept);
  Keep(&DaemonOptions::handle_signals, "handle_signals", options_, next, &kept);
  for (const std::string& key : kept) {
    spdlog::warn("options update: {} changed; it needs a restart, the running value is kept", key);
  }
}

void DaemonImpl::OnOptionsUpdate() {
  std::optional<DaemonOptions> next;
  {
    std::lock_guard<std::mutex> lock(update_mu_);
    next.swap(pending_options_);
  }
  if (!next || stopping_) return;
  KeepRestartOnlyOptions(&*next);
  const bool drain_changed = next->drain_interval_ms != options_.drain_interval_ms;
  const bool housekeeping_changed =
      next->housekeeping_interval_ms != options_.housekeeping_interval_ms;
  options_ = std::move(*next);
  if (drain_changed) {
    uv_timer_set_repeat(&drain_timer_, options_.drain_interval_ms);
    uv_timer_again(&drain_timer_);
  }
  if (housekeeping_changed) {
    uv_timer_set_repeat(&housekeeping_timer_, options_.housekeeping_interval_ms);
    uv_timer_again(&housekeeping_timer_);
  }
  for (auto& [id, conn] : clients_) conn->session->OptionsChanged();
  options_updates.fetch_add(1);
  spdlog::info(
      "options updated: m={}, n={}, similarity {}, length change {}, {} boundary pattern(s), "
      "{} device limit(s), drain every {} ms; applied to {} client(s)",
      options_.detection.stage_m, options_.detection.stage_n,
      options_.detection.similarity_threshold, options_.detection.length_change_threshold,
      options_.detection.boundary_patterns.size(), options_.device_limits.size(),
      options_.drain_interval_ms, clients_.size());
}

}  // namespace chameleon::daemon
