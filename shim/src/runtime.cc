#include "runtime.h"

#include <pthread.h>

#include <new>

#include "client.h"
#include "executor.h"
#include "log.h"

namespace chameleon::shim {

std::atomic<int> g_mode{0};
Runtime* g_runtime = nullptr;

namespace {

std::mutex g_init_mu;
thread_local bool t_in_init = false;
alignas(Runtime) unsigned char g_storage[sizeof(Runtime)];

// fork: the child must not inherit a lock held by another parent thread, and must not write into
// the parent's segment (it is MAP_SHARED). Prepare takes the slow-path locks; the child then
// forgets the daemon connection, the parent's allocations and the client thread (which does not
// exist in the child) and re-registers lazily on its next tracked call.
void AtForkPrepare() {
  if (g_runtime == nullptr) return;
  g_runtime->tracker_mu.lock();
  g_runtime->table.writer_mutex().lock();
  g_runtime->kernels.mutex().lock();
}

void AtForkParent() {
  if (g_runtime == nullptr) return;
  g_runtime->kernels.mutex().unlock();
  g_runtime->table.writer_mutex().unlock();
  g_runtime->tracker_mu.unlock();
}

void AtForkChild() {
  if (g_runtime == nullptr) return;
  Runtime& rt = *g_runtime;
  rt.kernels.mutex().unlock();
  rt.table.ClearForChild();
  rt.table.writer_mutex().unlock();
  rt.tracker_mu.unlock();
  rt.telemetry.ResetForChild();
  // The name table lives in the parent's (shared) segment: the child must never append to it.
  rt.kernels.AttachNames(ipc::NameTableWriter(), false, nullptr);
  rt.vmm_handles.clear();
  for (auto& v : rt.device_live) v.store(0, std::memory_order_relaxed);
  rt.total_live.store(0, std::memory_order_relaxed);
  rt.active_captures.store(0, std::memory_order_relaxed);
  rt.daemon_disabled.store(false, std::memory_order_relaxed);
  ClientForgetAfterFork();
  ExecutorForgetAfterFork();
  rt.client_started.store(false, std::memory_order_relaxed);
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

void StartClientIfNeeded() {
  Runtime& rt = GetRuntime();
  if (rt.client_started.load(std::memory_order_acquire)) return;
  if (g_mode.load(std::memory_order_relaxed) != static_cast<int>(Mode::kTracking)) return;
  if (!rt.config.telemetry) return;
  bool expected = false;
  if (!rt.client_started.compare_exchange_strong(expected, true)) return;
  StartClient(&rt);
}

}  // namespace chameleon::shim
