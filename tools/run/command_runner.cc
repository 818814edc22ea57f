#include "command_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace chameleon::run {
namespace {

volatile sig_atomic_t g_child = 0;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// SI_USER / SI_QUEUE / SI_TKILL: sent by a process with kill(2) and friends (si_code <= 0); a
// terminal's signals come from the kernel (SI_KERNEL) and reach the child on their own.
void Forward(int sig, siginfo_t* info, void*) {
  if (g_child > 0 && info != nullptr && info->si_code <= 0) ::kill(g_child, sig);
}

void InstallForwarding() {
  struct sigaction sa {};
  sa.sa_sigaction = Forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) ::sigaction(sig, &sa, nullptr);
}

}  // namespace

void BlockForwardedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

int RunCommand(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  InstallForwarding();  // before fork: exec resets caught signals to their defaults in the child
  // Blocked across fork so that a signal arriving before g_child is set is held, not lost.
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  ::sigprocmask(SIG_BLOCK, &forwarded, &previous);
  for (int sig : kForwarded) sigdelset(&previous, sig);  // held since BlockForwardedSignals()
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    ::execvp(argv[0], argv.data());
    const int err = errno;
    std::fprintf(stderr, "chameleon-run: cannot run %s: %s\n", argv[0], std::strerror(err));
    ::_exit(err == ENOENT ? 127 : 126);
  }
  if (pid > 0) g_child = pid;
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    std::fprintf(stderr, "chameleon-run: fork: %s\n", std::strerror(errno));
    return 1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace chameleon::run
