// A chameleond started for one command: its own socket in a fresh temporary folder, metrics on
// an ephemeral loopback port, its own process group (a terminal's Ctrl-C reaches the command,
// not the daemon), stopped and cleaned up by Stop() or the destructor. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>

namespace chameleon::run {

class PrivateDaemon {
 public:
  PrivateDaemon() = default;
  PrivateDaemon(const PrivateDaemon&) = delete;
  PrivateDaemon& operator=(const PrivateDaemon&) = delete;
  ~PrivateDaemon() { Stop(); }

  /// Starts `daemon_path` and waits (10 s at most) until it answers `status` on its socket.
  /// Returns "" on success, else a message (the daemon's log is included when it exited).
  std::string Start(const std::string& daemon_path);

  /// SIGTERM, wait (5 s, then SIGKILL), remove the socket folder. Idempotent.
  void Stop();

  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }

 private:
  std::string ReadLog() const;
  void RemoveFolder();

  std::string folder_;  ///< mkdtemp folder holding the socket and the log
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace chameleon::run
