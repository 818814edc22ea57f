#include "runtime.h"

#include "lookup_cache.h"

namespace chameleon::shim {

std::atomic<int> g_mode{0};
Runtime* g_runtime = nullptr;

void Runtime::LockForFork() {
  LookupCachePoolMutex().lock();
  tracker_mu.lock();
  table.writer_mutex().lock();
  kernels.mutex().lock();
}

void Runtime::UnlockAfterFork() {
  kernels.mutex().unlock();
  table.writer_mutex().unlock();
  tracker_mu.unlock();
  LookupCachePoolMutex().unlock();
}

void Runtime::ResetInForkChild() {
  kernels.mutex().unlock();
  table.ClearForChild();
  table.writer_mutex().unlock();
  tracker_mu.unlock();
  LookupCachePoolMutex().unlock();
  telemetry.ResetForChild();
  // The name table lives in the parent's (shared) segment: the child must never append to it.
  kernels.AttachNames(ipc::NameTableWriter(), false, nullptr);
  vmm_handles.clear();
  for (auto& v : device_live) v.store(0, std::memory_order_relaxed);
  total_live.store(0, std::memory_order_relaxed);
  active_captures.store(0, std::memory_order_relaxed);
  daemon_disabled.store(false, std::memory_order_relaxed);
  client_started.store(false, std::memory_order_relaxed);
}

}  // namespace chameleon::shim
