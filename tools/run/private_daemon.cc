#include "private_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "chameleon/control/control_client.h"

namespace chameleon::run {
namespace {

// A daemon that neither answers nor exits within this long is broken; its start-up (config,
// socket, metrics endpoint) takes milliseconds.
constexpr int kStartTimeoutMs = 10000;
// chameleond drains its clients and exits well within this on SIGTERM (docs/operations.md).
constexpr int kStopTimeoutMs = 5000;
constexpr int kPollMs = 20;

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0) {
  }
}

// True once `pid` has exited (and is reaped); polls for at most `timeout_ms`.
bool WaitExit(pid_t pid, int timeout_ms) {
  for (int waited = 0;; waited += kPollMs) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    if (waited >= timeout_ms) return false;
    SleepMs(kPollMs);
  }
}

[[noreturn]] void ExecDaemon(const std::string& path, const std::string& socket,
                             const std::string& log) {
  ::setpgid(0, 0);
  sigset_t none;  // chameleon-run holds its termination signals; the daemon must get them
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  // --config '' runs on built-in defaults: a private daemon ignores the node's configuration.
  const char* argv[] = {path.c_str(),       "--config",    "",     "--socket", socket.c_str(),
                        "--metrics-listen", "127.0.0.1:0", nullptr};
  ::execv(path.c_str(), const_cast<char* const*>(argv));
  ::_exit(127);
}

}  // namespace

std::string PrivateDaemon::Start(const std::string& daemon_path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/chameleon-run.XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return "cannot create a folder for the private daemon";
  folder_ = buf.data();
  socket_ = folder_ + "/chameleond.sock";
  const std::string log = folder_ + "/chameleond.log";
  pid_ = ::fork();
  if (pid_ < 0) return "fork failed";
  if (pid_ == 0) ExecDaemon(daemon_path, socket_, log);
  for (int waited = 0; waited < kStartTimeoutMs; waited += kPollMs) {
    const auto reply = control::ControlRequest(socket_, {{"command", "status"}}, 1000);
    if (reply.value("ok", false)) return "";
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return "private chameleond (" + daemon_path + ") exited at start-up:\n" + ReadLog();
    }
    SleepMs(kPollMs);
  }
  return "private chameleond did not answer within 10 s:\n" + ReadLog();
}

void PrivateDaemon::Stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    if (!WaitExit(pid_, kStopTimeoutMs)) {
      ::kill(pid_, SIGKILL);
      WaitExit(pid_, kStopTimeoutMs);
    }
    pid_ = -1;
  }
  RemoveFolder();
}

std::string PrivateDaemon::ReadLog() const {
  std::ifstream in(folder_ + "/chameleond.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void PrivateDaemon::RemoveFolder() {
  if (folder_.empty()) return;
  ::unlink(socket_.c_str());
  ::unlink((folder_ + "/chameleond.log").c_str());
  ::rmdir(folder_.c_str());
  folder_.clear();
}

}  // namespace chameleon::run
