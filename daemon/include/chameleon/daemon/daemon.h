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

/// Thread-safety: Start and Run from one thread; Stop, metrics_port and the counters from any.
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

  /// The bound metrics port (resolved when 0 was asked), or 0 when metrics are disabled.
  int metrics_port() const;
  /// Connected clients right now (any thread).
  int clients() const;

 private:
  std::unique_ptr<DaemonImpl> impl_;
};

}  // namespace chameleon::daemon
