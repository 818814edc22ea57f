// Helpers for the service tests that drive real processes (chameleond, prometheus, promtool,
// cpack, systemd-analyze): spawn with posix_spawn, read output with deadlines, kill in teardown,
// and plain HTTP GETs on loopback. Not thread-safe; one per test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "support/wait_for.h"

namespace chameleon::service_test {

using Millis = std::chrono::milliseconds;

/// A child whose stdout and stderr go to one pipe we read. Killed (SIGKILL) and reaped when
/// destroyed, so a failing test never leaves a daemon or a Prometheus server behind.
class Child {
 public:
  /// Starts argv[0] (an absolute path) with the current environment plus `env` ("K=V").
  /// Returns nullptr (and fills *error) when posix_spawn fails.
  static std::unique_ptr<Child> Spawn(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env = {},
                                      std::string* error = nullptr);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  /// Reads until a line matches `pattern` (regex_search) or `timeout` passes; returns the
  /// sub-matches (0 = the whole match) or nullopt.
  std::optional<std::vector<std::string>> WaitForLine(const std::regex& pattern, Millis timeout);
  /// Everything read so far.
  const std::string& output() const { return output_; }
  bool Signal(int signal);
  /// Waits for exit (reading output meanwhile); the exit status (128 + signal when killed) or
  /// nullopt on timeout.
  std::optional<int> WaitExit(Millis timeout);
  bool running() const { return !exited_; }

 private:
  Child() = default;
  /// Reads what is available within `timeout`; false at end of file.
  bool Pump(Millis timeout);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string output_;
  std::size_t scanned_ = 0;  // output_ before this offset holds only complete, scanned lines
};

/// chameleond started on a socket in `dir` with its metrics on a free loopback port.
struct RunningDaemon {
  std::unique_ptr<Child> child;
  std::string socket_path;
  int metrics_port = 0;
};
/// Starts `binary` and waits (deadline) until it logs its metrics port; nullopt + *error if not.
std::optional<RunningDaemon> StartChameleond(const std::string& binary, const std::string& dir,
                                             const std::vector<std::string>& extra_args,
                                             std::string* error);

/// Result of running a command to completion.
struct Output {
  int exit_code = -1;  ///< -1 when it timed out (and was killed) or could not start
  std::string text;    ///< stdout and stderr interleaved
};
/// Runs argv with `stdin_text` on its standard input; kills it after `timeout`.
Output RunCommand(const std::vector<std::string>& argv, Millis timeout,
                  const std::string& stdin_text = "", const std::vector<std::string>& env = {});

/// GET http://127.0.0.1:port/path; the body when the status is 200, else nullopt.
std::optional<std::string> HttpGet(int port, const std::string& path, Millis timeout);

/// A loopback TCP port that was free a moment ago (for servers that cannot report the port they
/// picked themselves, like prometheus).
int PickFreePort();

/// Polling with a deadline (cross-process waits): the test tree's one helper.
using test_support::WaitFor;
/// How often the service tests re-check: each check may be an HTTP query or a control request
/// to another process, so not every 2 ms.
inline constexpr Millis kPollInterval{20};

/// A fresh directory under /tmp, removed with its contents when destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Reads a whole file ("" when it cannot be read).
std::string ReadFile(const std::string& path);
bool WriteFile(const std::string& path, const std::string& text);

}  // namespace chameleon::service_test
