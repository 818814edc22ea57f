#include "call_counter.h"

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "driver.h"

namespace chameleon::simgpu::detail {
namespace {

// Never destroyed: entry points may run from other threads while static destructors run at exit.
struct CounterTable {
  std::mutex mu;
  std::map<std::string, std::atomic<std::uint64_t>*, std::less<>> counters;
};

CounterTable& Table() {
  static auto* table = new CounterTable;
  return *table;
}

}  // namespace

std::atomic<std::uint64_t>* RegisterCounter(const char* name) {
  auto& t = Table();
  std::lock_guard lock(t.mu);
  auto it = t.counters.find(name);
  if (it != t.counters.end()) return it->second;
  auto* c = new std::atomic<std::uint64_t>(0);
  t.counters.emplace(name, c);
  return c;
}

std::uint64_t CallCount(const char* name) {
  auto& t = Table();
  std::lock_guard lock(t.mu);
  auto it = t.counters.find(std::string_view(name));
  return it == t.counters.end() ? 0 : it->second->load(std::memory_order_relaxed);
}

void LockCountersForFork() { Table().mu.lock(); }
void UnlockCountersAfterFork() { Table().mu.unlock(); }

void HostTick() { HostClock().Advance(HostCallNs()); }

}  // namespace chameleon::simgpu::detail
