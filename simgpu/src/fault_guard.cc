#include "fault_guard.h"

#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>

namespace chameleon::simgpu {
namespace {

// initial-exec TLS: reading it from a signal handler must not allocate.
thread_local sigjmp_buf* tl_jump __attribute__((tls_model("initial-exec"))) = nullptr;
struct sigaction g_previous_segv;
struct sigaction g_previous_bus;
// A mutex rather than std::call_once so that fork() can hold it: a child forked while a worker
// was inside a call_once would find the once-flag "in progress" forever and hang its own workers.
std::mutex g_install_mu;
bool g_installed = false;  // guarded by g_install_mu

void Forward(int sig, siginfo_t* info, void* uctx) {
  const struct sigaction& prev = sig == SIGSEGV ? g_previous_segv : g_previous_bus;
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uctx);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler) {
    prev.sa_handler(sig);
    return;
  }
  // Default action: reinstate it; returning re-executes the faulting instruction.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
}

void Handler(int sig, siginfo_t* info, void* uctx) {
  if (sigjmp_buf* jump = tl_jump) {
    tl_jump = nullptr;
    siglongjmp(*jump, 1);
  }
  Forward(sig, info, uctx);
}

}  // namespace

void InstallFaultHandler() {
  std::lock_guard lock(g_install_mu);
  if (g_installed) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = Handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous_segv);
  sigaction(SIGBUS, &sa, &g_previous_bus);
  g_installed = true;
}

void LockFaultHandlerForFork() { g_install_mu.lock(); }
void UnlockFaultHandlerAfterFork() { g_install_mu.unlock(); }

GuardResult RunGuarded(GuardedFn fn, void* arg) {
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) return GuardResult::kFault;  // via siglongjmp from Handler
  tl_jump = &jump;
  try {
    fn(arg);
  } catch (...) {  // a kernel's exception must not escape the worker thread
    tl_jump = nullptr;
    return GuardResult::kException;
  }
  tl_jump = nullptr;
  return GuardResult::kOk;
}

}  // namespace chameleon::simgpu
