// Runs chameleon-train-sim as a subprocess on simgpu's libcuda.so.1 and picks its output apart
// (docs/trainer.md); shared by the trainer's end-to-end tests.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace train_sim_test {

struct RunResult {
  bool exited = false;  // false: killed by a signal
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs the trainer with `args`; `env` entries ("NAME=value") are added to a minimal
/// environment whose LD_LIBRARY_PATH points at the simgpu build.
inline RunResult RunTrainer(const std::vector<std::string>& args,
                            const std::vector<std::string>& env = {},
                            const std::string& lib_dir = SIMGPU_LIB_DIR) {
  char dir_template[] = "/tmp/train_sim_test.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  std::vector<std::string> argv_s = {TRAIN_SIM_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s = {"LD_LIBRARY_PATH=" + lib_dir, "PATH=/usr/bin:/bin"};
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  for (auto& e : env_s) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  RunResult result;
  result.exited = WIFEXITED(status);
  result.code = result.exited ? WEXITSTATUS(status) : -WTERMSIG(status);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  rmdir(dir.c_str());
  return result;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Lines starting with `prefix` (e.g. "checksum ").
inline std::vector<std::string> LinesWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& line : Lines(text)) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

/// "step N loss X" without the time, which legitimately differs between configurations.
inline std::vector<std::string> Losses(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& line : LinesWith(text, "step "))
    out.push_back(line.substr(0, line.find(" time ")));
  return out;
}

inline unsigned long long Peak(const std::string& text) {
  const auto lines = LinesWith(text, "peak ");
  return lines.size() == 1 ? std::stoull(lines[0].substr(5)) : 0;
}

inline std::string Checksum(const std::string& text) {
  const auto lines = LinesWith(text, "checksum ");
  return lines.size() == 1 ? lines[0] : "";
}

inline std::vector<std::string> With(std::vector<std::string> base,
                                     std::vector<std::string> extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

}  // namespace train_sim_test
