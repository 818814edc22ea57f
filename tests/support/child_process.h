// Runs a built tool as a child process with extra environment, for tests that check a command
// line tool from the outside: exit status (128 + N for signal N, as a shell reports it), stdout
// and stderr captured to files. Header-only; thread-safe (no shared state).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace chameleon::test_support {

/// name -> value to set, or nullopt to unset, in the child only.
using EnvChanges = std::vector<std::pair<std::string, std::optional<std::string>>>;

/// Forks and execs `argv` with `env` applied, stdout/stderr to the given files ("" = inherit).
inline pid_t StartChild(const std::vector<std::string>& argv, const EnvChanges& env,
                        const std::string& out_path = "", const std::string& err_path = "") {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  for (const auto& [name, value] : env) {
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  const auto redirect = [](const std::string& path, int to) {
    if (path.empty()) return;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) ::dup2(fd, to);
  };
  redirect(out_path, STDOUT_FILENO);
  redirect(err_path, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(126);
}

/// Waits for `pid`: its exit status, or 128 + N when signal N ended it.
inline int WaitChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct ChildResult {
  int status = -1;
  std::string out;
  std::string err;
};

/// Runs `argv` to completion; `scratch` is a folder for the captured output.
inline ChildResult RunChild(const std::vector<std::string>& argv, const EnvChanges& env,
                            const std::string& scratch) {
  const std::string out = scratch + "/child.out";
  const std::string err = scratch + "/child.err";
  ChildResult r;
  r.status = WaitChild(StartChild(argv, env, out, err));
  r.out = ReadWholeFile(out);
  r.err = ReadWholeFile(err);
  return r;
}

}  // namespace chameleon::test_support
