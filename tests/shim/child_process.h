// Runs a workload program as a child process with extra environment variables, talking to it
// over its stdin/stdout (line based, with deadlines). Used by the shim tests, whose workloads run
// under LD_PRELOAD=libchameleon.so while the test process plays the daemon.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace shim_test {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// Starts `argv[0]` with the current environment plus `env` (empty value = unset).
  bool Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
  /// Next stdout line (without '\n'); false on EOF or when `timeout_ms` passes.
  bool ReadLine(std::string* line, int timeout_ms);
  /// Reads lines until one equals `marker` (collecting the ones before it).
  bool ReadUntil(const std::string& marker, std::vector<std::string>* lines, int timeout_ms);
  bool WriteLine(const std::string& line);
  /// Waits for exit (kills after `timeout_ms`); the exit status, or -1 if killed / signalled.
  int Wait(int timeout_ms);
  /// Everything still unread on stdout after exit.
  std::vector<std::string> RemainingLines();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int in_fd_ = -1;   // child's stdin
  int out_fd_ = -1;  // child's stdout
  std::string buffer_;
  bool eof_ = false;
};

/// Runs a program to completion and returns its exit status and stdout lines.
int RunToCompletion(const std::vector<std::string>& argv,
                    const std::map<std::string, std::string>& env, std::vector<std::string>* out,
                    int timeout_ms);

/// Exit status, stdout lines and stderr text of a program run to completion.
struct CapturedRun {
  int status = -1;
  std::vector<std::string> out;
  std::string err;
};
/// RunToCompletion with stderr captured too (through a temporary file, so a chatty stderr can
/// never block the child).
CapturedRun RunCapturingStderr(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env, int timeout_ms);

/// The trainer's lines that must match bit for bit between runs: step losses (without the
/// simulated time, which swapping changes), `peak` and `checksum`.
std::vector<std::string> TrainerResults(const std::vector<std::string>& lines);

}  // namespace shim_test
