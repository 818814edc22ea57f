// The service side of chameleond, beside Daemon::Run(): SIGHUP reloads, SIGTERM/SIGINT stops
// (STOPPING=1 first) and systemd watchdog pings, on a thread of their own so the Daemon class
// needs no service hooks.
//
// The watchdog ping is earned, not timed: before each WATCHDOG=1 the supervisor asks the loop a
// question over the daemon's own socket (a chameleonctl "status" request, by default) and pings
// only when the answer comes back, so a hung loop stops the pings and systemd restarts it.
// SIGHUP: RELOADING=1, ReloadConfig (an invalid file keeps the running configuration and is
// logged line by line), the `apply` hook with the new configuration, READY=1.
//
// SIGTERM/SIGINT: STOPPING=1, then the `stop` hook (Daemon::Stop). The signals must be blocked
// in every thread (BlockServiceSignals() first thing in main, before any thread exists) so they
// are read from a signalfd here; the Daemon then runs with handle_signals = false.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chameleon/daemon/config_file.h"

namespace chameleon::daemon {

/// Thread-safety: Start/Stop from one thread; config() and the counters from any.
class ServiceSupervisor {
 public:
  struct Hooks {
    /// True when the event loop answered; empty: a "status" request on the configured socket.
    std::function<bool()> loop_alive;
    /// Called on the supervisor thread with each accepted reload (log level is applied first).
    std::function<void(const ServiceConfig&)> apply;
    /// Called on the supervisor thread on SIGTERM or SIGINT, after STOPPING=1.
    std::function<void()> stop;
  };

  /// Blocks SIGHUP, SIGTERM and SIGINT in the calling thread; later threads inherit the mask.
  static void BlockServiceSignals();

  /// `args`: chameleond's arguments (without argv[0]), re-applied over the file at each reload.
  ServiceSupervisor(std::vector<std::string> args, ServiceConfig current, Hooks hooks,
                    std::string default_config_path = kDefaultConfigPath);
  ~ServiceSupervisor();
  ServiceSupervisor(const ServiceSupervisor&) = delete;
  ServiceSupervisor& operator=(const ServiceSupervisor&) = delete;

  /// Starts the thread. False (with the reason logged) when the signalfd cannot be created.
  bool Start();
  /// Wakes the thread and joins it. Idempotent.
  void Stop();

  ServiceConfig config() const;
  std::uint64_t reloads_applied() const { return reloads_applied_.load(); }
  std::uint64_t reloads_rejected() const { return reloads_rejected_.load(); }
  std::uint64_t watchdog_pings() const { return watchdog_pings_.load(); }
  bool stop_requested() const { return stop_requested_.load(); }

 private:
  void Run();
  void Reload();
  void OnSignal(int signal);
  void MaybePing(std::uint64_t now_us);

  const std::vector<std::string> args_;
  const std::string default_config_path_;
  Hooks hooks_;
  mutable std::mutex mu_;
  ServiceConfig config_;  // guarded by mu_
  int signal_fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
  std::uint64_t watchdog_interval_us_ = 0;
  std::uint64_t last_ping_us_ = 0;
  std::atomic<std::uint64_t> reloads_applied_{0};
  std::atomic<std::uint64_t> reloads_rejected_{0};
  std::atomic<std::uint64_t> watchdog_pings_{0};
  std::atomic<bool> stop_requested_{false};
};

}  // namespace chameleon::daemon
