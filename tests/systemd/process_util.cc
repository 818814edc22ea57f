#include "process_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace chameleon::service_test {

namespace {

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::unique_ptr<Child> Child::Spawn(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env, std::string* error) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    if (error) *error = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> args = argv;
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> c_args = CStrings(args);
  std::vector<char*> c_env = CStrings(environment);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, c_args[0], &actions, nullptr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    if (error) *error = "posix_spawn " + argv[0] + ": " + std::strerror(rc);
    return nullptr;
  }
  std::unique_ptr<Child> child(new Child());
  child->pid_ = pid;
  child->out_fd_ = fds[0];
  return child;
}

Child::~Child() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

bool Child::Pump(Millis timeout) {
  if (out_fd_ < 0) return false;
  pollfd p{out_fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return true;
  char buf[4096];
  const ssize_t n = read(out_fd_, buf, sizeof(buf));
  if (n <= 0) {
    close(out_fd_);
    out_fd_ = -1;
    return false;
  }
  output_.append(buf, static_cast<std::size_t>(n));
  return true;
}

std::optional<std::vector<std::string>> Child::WaitForLine(const std::regex& pattern,
                                                           Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    std::size_t eol;
    while ((eol = output_.find('\n', scanned_)) != std::string::npos) {
      const std::string line = output_.substr(scanned_, eol - scanned_);
      scanned_ = eol + 1;
      std::smatch m;
      if (std::regex_search(line, m, pattern)) {
        std::vector<std::string> groups;
        for (const auto& g : m) groups.push_back(g.str());
        return groups;
      }
    }
    if (Clock::now() >= deadline) return std::nullopt;
    if (!Pump(Millis(MillisLeft(deadline))) && output_.find('\n', scanned_) == std::string::npos) {
      return std::nullopt;  // end of output and nothing left to scan
    }
  }
}

bool Child::Signal(int signal) { return !exited_ && kill(pid_, signal) == 0; }

std::optional<int> Child::WaitExit(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!exited_) {
    const pid_t r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      break;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    // Keep the pipe drained so a chatty child never blocks on a full pipe while exiting.
    if (!Pump(Millis(std::min(20, MillisLeft(deadline))))) {
      std::this_thread::sleep_for(Millis(5));
    }
  }
  // The rest of its output; stop at end of file or when nothing more comes (a grandchild may
  // still hold the pipe open).
  while (out_fd_ >= 0) {
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0 || !Pump(Millis(0))) break;
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

std::optional<RunningDaemon> StartChameleond(const std::string& binary, const std::string& dir,
                                             const std::vector<std::string>& extra_args,
                                             std::string* error) {
  RunningDaemon d;
  d.socket_path = dir + "/chameleond.sock";
  std::vector<std::string> argv = {binary, "--socket", d.socket_path, "--metrics-listen",
                                   "127.0.0.1:0"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  d.child = Child::Spawn(argv, {}, error);
  if (!d.child) return std::nullopt;
  // chameleond logs the port it bound when asked for port 0.
  const auto port = d.child->WaitForLine(
      std::regex(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)"), Millis(10000));
  if (!port) {
    *error = "chameleond did not report its metrics port; output:\n" + d.child->output();
    return std::nullopt;
  }
  d.metrics_port = std::stoi((*port)[1]);
  if (!WaitFor([&] { return access(d.socket_path.c_str(), F_OK) == 0; }, Millis(10000),
               kPollInterval)) {
    *error = "chameleond did not create " + d.socket_path + "; output:\n" + d.child->output();
    return std::nullopt;
  }
  return d;
}

Output RunCommand(const std::vector<std::string>& argv, Millis timeout,
                  const std::string& stdin_text, const std::vector<std::string>& env) {
  Output out;
  std::vector<std::string> args = argv;
  std::string input_path;
  if (!stdin_text.empty()) {
    // Through a file: the child reads it at its own pace and we never block on a pipe.
    char tmpl[] = "/tmp/chameleon-stdin-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return out;
    input_path = tmpl;
    const bool written =
        write(fd, stdin_text.data(), stdin_text.size()) == static_cast<ssize_t>(stdin_text.size());
    close(fd);
    if (!written) return out;
    args = {"/bin/sh", "-c", "exec \"$0\" \"$@\" < " + input_path};
    args.insert(args.end(), argv.begin(), argv.end());
  }
  std::string error;
  auto child = Child::Spawn(args, env, &error);
  if (!child) {
    out.text = error;
    return out;
  }
  const std::optional<int> code = child->WaitExit(timeout);
  out.exit_code = code.value_or(-1);
  out.text = child->output();
  if (!input_path.empty()) unlink(input_path.c_str());
  return out;
}

std::optional<std::string> HttpGet(int port, const std::string& path, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{timeout.count() / 1000, static_cast<long>(timeout.count() % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string request =
      "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string response;
  char buf[8192];
  while (Clock::now() < deadline) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  const auto body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || response.compare(9, 3, "200") != 0 ||
      body == std::string::npos) {
    return std::nullopt;
  }
  return response.substr(body + 4);
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace chameleon::service_test
