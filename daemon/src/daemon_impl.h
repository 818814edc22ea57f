// Internals of Daemon shared by server.cc (loop, timers, workers), connection.cc (socket I/O,
// HELLO) and control.cc (chameleonctl commands). Loop thread only, except where noted.
#pragma once

#include <prometheus/exposer.h>
#include <uv.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chameleon/daemon/client_session.h"
#include "chameleon/daemon/lending_metrics.h"
#include "chameleon/daemon/metrics.h"
#include "chameleon/daemon/node_lending.h"
#include "chameleon/daemon/node_view.h"
#include "chameleon/daemon/options.h"
#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/ipc/unix_socket.h"

namespace chameleon::daemon {

class DaemonImpl;

/// One accepted socket: a shim client once its HELLO is accepted, or a chameleonctl peer.
struct Connection {
  DaemonImpl* daemon = nullptr;
  int fd = -1;
  uv_poll_t poll{};
  std::vector<std::uint8_t> in;   // bytes received, not yet parsed
  std::vector<std::uint8_t> out;  // bytes queued for sending
  std::size_t out_sent = 0;
  bool writable_armed = false;
  std::deque<int> fds;  // descriptors received with SCM_RIGHTS, not yet consumed
  ipc::PeerCredentials creds;
  std::shared_ptr<ClientSession> session;
  bool closing = false;
};

std::uint64_t MonotonicNs();
/// The text of the file CHAMELEON_TOPOLOGY names ("" when unset or unreadable, with a warning).
std::string TopologyOverrideText();

class DaemonImpl {
 public:
  explicit DaemonImpl(DaemonOptions options);
  ~DaemonImpl();

  void Start();
  int Run();
  void Stop();                             // any thread
  bool UpdateOptions(DaemonOptions next);  // any thread

  std::atomic<int> metrics_port{0};
  std::atomic<int> client_count{0};
  std::atomic<std::uint64_t> options_updates{0};

  // --- connection.cc ---
  void OnListenReadable();
  void OnConnectionEvent(Connection* conn, int status, int events);
  void Send(Connection* conn, std::span<const std::uint8_t> bytes);
  /// Releases the connection; `clean`: the peer left normally (its last records are drained).
  void CloseConnection(Connection* conn, const std::string& reason, bool clean = false);
  void Refuse(Connection* conn, ipc::RefuseReason reason, BadInput counter,
              const std::string& text);

  // --- control.cc ---
  void HandleControl(Connection* conn, std::string_view request);

  // --- server.cc ---
  void OnDrainTimer();
  void OnHousekeepingTimer();
  void OnStop();
  // --- live_options.cc ---
  void OnOptionsUpdate();
  // --- node_rounds.cc ---
  /// One node-placement round over every client (housekeeping timer).
  void RunNodeRound(std::uint64_t now_ns);
  /// Republishes the policies of the clients `ids` still connected, in that order.
  void RepublishClients(const std::vector<std::uint32_t>& ids);

 private:
  void StartUpdates();
  void CloseUpdates();  // no UpdateOptions reaches the loop after this
  void KeepRestartOnlyOptions(DaemonOptions* next) const;
  void BindSocket();
  void StartMetrics();
  void ReportHostMemory();
  void ReadAvailable(Connection* conn);
  bool Dispatch(Connection* conn, const ipc::MessageHeader& header,
                std::span<const std::uint8_t> payload);
  void HandleHello(Connection* conn, std::span<const std::uint8_t> payload);
  void FlushOut(Connection* conn);
  void SendReply(Connection* conn, const std::string& json);
  void StartDetection(Connection* conn, std::uint64_t now_ns);
  void StartGeneration(Connection* conn);
  Connection* FindClient(std::uint32_t id);
  int AllocateSlot();

  friend struct Jobs;

  DaemonOptions options_;
  Metrics metrics_;
  LendingMetrics lending_metrics_{*metrics_.registry()};
  NodeLending node_{&lending_metrics_,
                    TopologyOverrideText()};  // leases and placement over every client
  std::unique_ptr<prometheus::Exposer> exposer_;
  uv_loop_t loop_{};
  std::atomic<bool> loop_ready_{false};
  int listen_fd_ = -1;
  uv_poll_t listen_poll_{};
  uv_timer_t drain_timer_{};
  uv_timer_t housekeeping_timer_{};
  uv_async_t stop_async_{};
  // Live updates: UpdateOptions (any thread) leaves the options here and wakes the loop.
  uv_async_t update_async_{};
  std::mutex update_mu_;
  std::optional<DaemonOptions> pending_options_;  // guarded by update_mu_
  bool updates_open_ = false;                     // guarded by update_mu_
  uv_signal_t sigint_{};
  uv_signal_t sigterm_{};
  bool stopping_ = false;
  std::set<Connection*> connections_;
  std::map<std::uint32_t, Connection*> clients_;  // by client id
  std::vector<bool> slots_;
  std::uint32_t next_client_id_ = 1;
  std::uint64_t started_ns_ = 0;
  NodeView node_view_ = NodeView::FromEnvironment();  // GPUs of the connected clients
};

}  // namespace chameleon::daemon
