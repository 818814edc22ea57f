#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace shim_test {
namespace {

long long NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

ChildProcess::~ChildProcess() {
  if (pid_ > 0) Wait(0);
  if (in_fd_ >= 0) ::close(in_fd_);
  if (out_fd_ >= 0) ::close(out_fd_);
}

bool ChildProcess::Start(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env) {
  int to_child[2];
  int from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) return false;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    for (const auto& [key, value] : env) {
      if (value.empty()) {
        ::unsetenv(key.c_str());
      } else {
        ::setenv(key.c_str(), value.c_str(), 1);
      }
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  in_fd_ = to_child[1];
  out_fd_ = from_child[0];
  return true;
}

bool ChildProcess::ReadLine(std::string* line, int timeout_ms) {
  const long long deadline = NowMs() + timeout_ms;
  for (;;) {
    const auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      *line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    if (eof_) return false;
    const long long left = deadline - NowMs();
    if (left <= 0) return false;
    pollfd p{out_fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    char chunk[4096];
    const ssize_t got = ::read(out_fd_, chunk, sizeof(chunk));
    if (got <= 0) {
      eof_ = true;
    } else {
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }
}

bool ChildProcess::ReadUntil(const std::string& marker, std::vector<std::string>* lines,
                             int timeout_ms) {
  const long long deadline = NowMs() + timeout_ms;
  std::string line;
  while (ReadLine(&line, static_cast<int>(std::max(1LL, deadline - NowMs())))) {
    if (line == marker) return true;
    lines->push_back(line);
  }
  return false;
}

bool ChildProcess::WriteLine(const std::string& line) {
  const std::string data = line + "\n";
  return ::write(in_fd_, data.data(), data.size()) == static_cast<ssize_t>(data.size());
}

int ChildProcess::Wait(int timeout_ms) {
  if (pid_ <= 0) return -1;
  const long long deadline = NowMs() + timeout_ms;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (NowMs() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    // Bounded wait for a child to exit: poll its stdout (EOF at exit) rather than sleep blindly.
    if (eof_) {
      ::poll(nullptr, 0, 5);  // stdout closed, exit imminent: poll waitpid with a deadline
      continue;
    }
    pollfd p{out_fd_, POLLIN, 0};
    ::poll(&p, 1, 10);
    if (p.revents & POLLIN) {
      char chunk[4096];
      const ssize_t got = ::read(out_fd_, chunk, sizeof(chunk));
      if (got > 0) buffer_.append(chunk, static_cast<std::size_t>(got));
      if (got == 0) eof_ = true;
    }
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> ChildProcess::RemainingLines() {
  std::vector<std::string> lines;
  std::string line;
  while (ReadLine(&line, 1000)) lines.push_back(line);
  return lines;
}

int RunToCompletion(const std::vector<std::string>& argv,
                    const std::map<std::string, std::string>& env, std::vector<std::string>* out,
                    int timeout_ms) {
  ChildProcess child;
  if (!child.Start(argv, env)) return -1;
  std::string line;
  const long long deadline = NowMs() + timeout_ms;
  while (child.ReadLine(&line, static_cast<int>(std::max(1LL, deadline - NowMs())))) {
    out->push_back(line);
  }
  return child.Wait(static_cast<int>(std::max(1LL, deadline - NowMs())));
}

CapturedRun RunCapturingStderr(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env, int timeout_ms) {
  CapturedRun r;
  char path[] = "/tmp/chameleon_test_stderr_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return r;
  ::close(fd);
  std::vector<std::string> sh = {"/bin/sh", "-c", std::string("exec \"$0\" \"$@\" 2>") + path};
  sh.insert(sh.end(), argv.begin(), argv.end());
  r.status = RunToCompletion(sh, env, &r.out, timeout_ms);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  r.err = text.str();
  ::unlink(path);
  return r;
}

std::vector<std::string> TrainerResults(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (std::string l : lines) {
    if (l.rfind("step ", 0) == 0) {
      const auto t = l.find(" time ");
      if (t != std::string::npos) l.erase(t);
      out.push_back(l);
    } else if (l.rfind("peak ", 0) == 0 || l.rfind("checksum ", 0) == 0) {
      out.push_back(l);
    }
  }
  return out;
}

}  // namespace shim_test
