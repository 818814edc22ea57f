#include "init.h"

#include <pthread.h>
#include <sys/stat.h>

#include <mutex>
#include <new>
#include <string>

#include "client.h"
#include "log.h"
#include "pointer_report.h"

namespace chameleon::shim {
namespace {

std::mutex g_init_mu;
thread_local bool t_in_init = false;
alignas(Runtime) unsigned char g_storage[sizeof(Runtime)];

// The wiring between the layers: the executor's uplink into the telemetry, and the daemon
// client's sink into the executor. Never destroyed, like Runtime.
alignas(TelemetryUplink) unsigned char g_uplink_storage[sizeof(TelemetryUplink)];
TelemetryUplink* g_uplink = nullptr;
ExecutorPolicySink g_policy_sink(&g_executor);

std::atomic<bool> g_decided{false};
std::mutex g_decide_mu;

// fork: the child must not inherit a lock held by another parent thread, and must not write into
// the parent's segment (it is MAP_SHARED). Prepare takes the slow-path locks; the child then
// forgets the daemon connection, the parent's allocations, the executor and the client thread
// (which does not exist in the child) and re-registers lazily on its next tracked call.
void AtForkPrepare() {
  if (g_runtime != nullptr) g_runtime->LockForFork();
}

void AtForkParent() {
  if (g_runtime != nullptr) g_runtime->UnlockAfterFork();
}

void AtForkChild() {
  if (g_runtime == nullptr) return;
  g_runtime->ResetInForkChild();
  ClientForgetAfterFork();
  // The parent's CUDA objects are not ours: the child passes memory through, decided.
  ExecutorForgetAfterFork();
  g_decided.store(true, std::memory_order_relaxed);
  new (&g_decide_mu) std::mutex();
}

bool SocketExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

void InitSlow() {
  if (t_in_init) return;  // the real driver's constructors called back into us: answer "no driver"
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_mode.load(std::memory_order_acquire) != 0) return;
  t_in_init = true;
  // Constructed before anything can re-enter, so a re-entrant call finds null real functions.
  g_runtime = new (g_storage) Runtime();
  Runtime& rt = *g_runtime;
  g_uplink = new (g_uplink_storage) TelemetryUplink(&rt);
  rt.config = LoadConfig();
  const bool driver_ok = LoadRealDriver(rt.config.real_libcuda.c_str(), &rt.driver);
  rt.telemetry.Configure(&rt.driver.aux, rt.device_live, rt.config.debug_seqchange);
  pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild);
  Mode mode = Mode::kTracking;
  if (rt.config.disabled || !driver_ok) mode = Mode::kPassThrough;
  Log(LogLevel::kInfo, "initialised: %s, real driver '%s'",
      mode == Mode::kTracking ? "tracking" : "pass-through", rt.config.real_libcuda.c_str());
  t_in_init = false;
  g_mode.store(static_cast<int>(mode), std::memory_order_release);
}

void StartDaemonClient(Runtime& rt) {
  const int mode = g_mode.load(std::memory_order_acquire);
  if (mode == static_cast<int>(Mode::kUninitialised)) return;  // re-entered during stage 1
  if (rt.client_started.load(std::memory_order_acquire)) return;
  bool expected = false;
  if (!rt.client_started.compare_exchange_strong(expected, true)) return;
  // Settled either way: a process that wants no client does not ask again on every op.
  if (mode != static_cast<int>(Mode::kTracking) || !rt.config.telemetry) return;
  StartClient(&rt, &g_policy_sink);
}

Executor* DecideExecutor(Runtime& rt) {
  if (g_decided.load(std::memory_order_acquire)) return ExecutorIfOn();
  // Its first connection attempt is synchronous, so a daemon that is up is attached by now.
  StartDaemonClient(rt);
  std::lock_guard<std::mutex> lock(g_decide_mu);
  if (!g_decided.load(std::memory_order_relaxed)) {
    // A socket that exists counts too (a daemon still starting, or slower than
    // CHAMELEON_CONNECT_TIMEOUT_MS): the decision is taken once, before the first allocation.
    const Config& c = rt.config;
    ExecutorEnv env;
    env.config = &c;
    env.driver = &rt.driver;
    env.daemon = c.telemetry && (rt.telemetry.active() || SocketExists(c.socket_path));
    env.table = &rt.table;
    env.ops_disabled = &rt.daemon_disabled;
    env.active_captures = &rt.active_captures;
    env.uplink = g_uplink;
    Executor* ex = CreateExecutor(env);
    // Occurrences are counted in ring order from here on (before any policy can arrive).
    if (ex != nullptr) rt.telemetry.SetOccurrenceCounter(&ex->runner->occurrences());
    g_executor.store(ex, std::memory_order_release);
    g_decided.store(true, std::memory_order_release);
  }
  return ExecutorIfOn();
}

}  // namespace chameleon::shim
