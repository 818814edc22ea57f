// chameleon_* exports (shim_api.h) and the unload hook.
#include "chameleon/shim/shim_api.h"

#include <algorithm>
#include <cstring>

#include <string>

#include "client.h"
#include "executor.h"
#include "log.h"
#include "runtime.h"

using namespace chameleon::shim;

namespace {

// ChameleonShimStats is the C ABI of chameleon_shim_get_stats (shim_api.h): programs compiled
// against it read fields by offset, so its fields and their order stay frozen and it is filled
// by name here instead of being generated from executor_counters.inc like everything else.
void FillExecutorStats(ChameleonShimStats* s) {
  Executor* ex = ExecutorIfOn();
  if (ex == nullptr) return;
  const swap::SwapCounters& c = ex->counters;
  const auto get = [](const std::atomic<std::uint64_t>& v) { return swap::SwapCounters::Get(v); };
  s->executor_on = 1;
  s->device_limit_bytes = ex->engine->device_limit();
  s->swap_out_bytes = get(c.swap_out_bytes);
  s->swap_in_bytes = get(c.swap_in_bytes);
  s->fault_ins = get(c.fault_ins);
  s->evictions = get(c.evictions);
  s->stall_count = get(c.stall_count);
  s->stall_ns = get(c.stall_ns);
  s->prefetch_hits = get(c.prefetch_hits);
  s->prefetch_misses = get(c.prefetch_misses);
  s->vmm_calls = get(c.vmm_calls);
  s->chunk_bytes = get(c.chunk_bytes);
  s->policy_generation_applied = get(c.policy_generation);
  s->policy_ignored = get(c.policy_ignored);
  s->executor_iterations = get(c.iterations);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) uint64_t chameleon_shim_call_count(
    const char* symbol) {
  const int id = FindSymbol(symbol);
  return id < 0 ? 0 : TotalCalls(static_cast<SymbolId>(id));
}

extern "C" __attribute__((visibility("default"))) int chameleon_shim_get_stats(
    ChameleonShimStats* out, size_t bytes) {
  if (out == nullptr) return -1;
  ChameleonShimStats s{};
  s.struct_bytes = std::min(bytes, sizeof(s));
  s.mode = static_cast<uint64_t>(g_mode.load(std::memory_order_acquire));
  if (s.mode != 0) {
    Runtime& rt = GetRuntime();
    const ClientStatus c = GetClientStatus();
    s.connected = c.connected ? 1 : 0;
    s.client_id = c.client_id;
    s.connects = c.connects;
    s.policy_generation = c.policy_generation;
    s.records_written = rt.telemetry.written();
    s.records_dropped = rt.telemetry.dropped();
    s.allocations_live = rt.table.live_count();
    s.bytes_live = rt.total_live.load(std::memory_order_relaxed);
    s.bytes_peak = rt.total_peak.load(std::memory_order_relaxed);
    s.lookup_give_ups = rt.table.lookup_give_ups();
    s.iterations = rt.telemetry.iterations();
    s.detail_done_seq = rt.telemetry.detail_done();
    s.active_captures = static_cast<uint64_t>(rt.active_captures.load(std::memory_order_relaxed));
    s.daemon_disabled = rt.daemon_disabled.load(std::memory_order_relaxed) ? 1 : 0;
    FillExecutorStats(&s);
  }
  std::memcpy(out, &s, s.struct_bytes);
  return 0;
}

extern "C" __attribute__((visibility("default"))) int chameleon_shim_device_bytes(int device,
                                                                                  uint64_t* live,
                                                                                  uint64_t* peak) {
  if (device < 0 || device >= static_cast<int>(kMaxDevices)) return -1;
  if (g_mode.load(std::memory_order_acquire) == 0) {
    if (live) *live = 0;
    if (peak) *peak = 0;
    return 0;
  }
  Runtime& rt = GetRuntime();
  if (live) *live = rt.device_live[device].load(std::memory_order_relaxed);
  if (peak) *peak = rt.device_peak[device].load(std::memory_order_relaxed);
  return 0;
}

namespace {

// CHAMELEON_DEBUG=stats: one summary line at exit (tests/gpu reads it: "events seen").
void LogExitStats() {
  Runtime& rt = GetRuntime();
  std::string calls;
  for (std::uint32_t i = 0; i < kSymbolCount; ++i) {
    const std::uint64_t n = TotalCalls(static_cast<SymbolId>(i));
    if (n == 0) continue;
    calls += " ";
    calls += kSymbols[i].name;
    calls += "=" + std::to_string(n);
  }
  const ClientStatus c = GetClientStatus();
  Log(LogLevel::kWarn,
      "stats: mode=%d connected=%d records=%llu dropped=%llu live_allocations=%llu "
      "peak_bytes=%llu iterations=%llu calls:%s",
      g_mode.load(std::memory_order_relaxed), c.connected ? 1 : 0,
      static_cast<unsigned long long>(rt.telemetry.written()),
      static_cast<unsigned long long>(rt.telemetry.dropped()),
      static_cast<unsigned long long>(rt.table.live_count()),
      static_cast<unsigned long long>(rt.total_peak.load(std::memory_order_relaxed)),
      static_cast<unsigned long long>(rt.telemetry.iterations()), calls.c_str());
  Executor* ex = ExecutorIfOn();
  if (ex == nullptr) return;
  // One line, key=value, parsed by tests and scripts (docs/shim.md): every counter of
  // chameleon/ipc/executor_counters.inc after the limit.
  Log(LogLevel::kWarn, "executor: limit=%llu%s",
      static_cast<unsigned long long>(ex->engine->device_limit()),
      FormatCounterPairs(ex->counters.Values()).c_str());
}

}  // namespace

// A clean exit tells the daemon so (client_exited sentinel) instead of letting it time out.
__attribute__((destructor)) static void ChameleonUnload() {
  if (g_mode.load(std::memory_order_acquire) == 0) return;
  ClientNoteExit();
  ExecutorWriteExitStats();
  if (GetRuntime().config.debug_stats) LogExitStats();
}
