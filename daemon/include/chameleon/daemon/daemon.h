// chameleond's core: a libuv loop serving the UNIX socket (clients' HELLO with their segment fd,
// chameleonctl's control requests), draining every client's ring on a timer, heartbeats and
// liveness, boundary detection and policy generation on the libuv thread pool, and the
// Prometheus endpoint. docs/daemon.md describes it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "chameleon/daemon/options.h"

namespace chameleon::daemon {

class DaemonImpl;

/// Thread-safety: Start and Run from one thread; Stop, UpdateOptions, metrics_port and the
/// counters from any.
class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// Binds the socket and the metrics endpoint. Throws std::runtime_error with a clear message
  /// (address in use, bad HOST:PORT, ...): the only place the daemon throws.
  void Start();
  /// Runs the loop until Stop(); returns 0 on a clean stop.
  int Run();
  /// Asks the loop to stop: clients are told (daemon_exited) and released, the socket removed.
  void Stop();

  /// Applies `options` on the loop thread, soon after the call (a SIGHUP reload). Every setting
  /// that can change in a running daemon does: timers at once, detection thresholds from each
  /// client's next iteration, policy settings and device limits from its next candidate, new
  /// boundary patterns for clients whose loop is not found yet (docs/operations.md has the table).
  /// socket_path, socket_mode, metrics_listen, max_clients and handle_signals keep their running
  /// values; a change to any of them is logged once as needing a restart. False when the loop is
  /// not running (before Start, after Stop): nothing is applied.
  bool UpdateOptions(DaemonOptions options);
  /// Updates applied on the loop thread so far (tests wait on it).
  std::uint64_t options_updates() const;

  /// The bound metrics port (resolved when 0 was asked), or 0 when metrics are disabled.
  int metrics_port() const;
  /// Connected clients right now (any thread).
  int clients() const;

 private:
  std::unique_ptr<DaemonImpl> impl_;
};

}  // namespace chameleon::daemon
