// Process-wide state of the shim and its lazy, thread-safe initialisation.
//
// Every exported wrapper starts with Enter(symbol): one acquire load when initialised. The first
// call initialises under a mutex (read the environment, open the real driver, register the fork
// handlers); the client thread (daemon connection) starts on the first tracked call that is not a
// cuGetProcAddress lookup, because cudart looks entry points up before cuInit and device facts
// need an initialised driver.
//
// The Runtime object is never destroyed: CUDA calls made from other threads or atexit handlers
// during process exit must still find it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "alloc_table.h"
#include "config.h"
#include "kernel_registry.h"
#include "real_driver.h"
#include "symbols.h"
#include "telemetry.h"

namespace chameleon::shim {

enum class Mode : int {
  kUninitialised = 0,
  kPassThrough = 1,  ///< CHAMELEON_DISABLE=1 or no usable driver: forward only
  kTracking = 2,     ///< normal operation
};

/// Physical VMM allocation (cuMemCreate handle) as the shim saw it.
struct VmmHandle {
  std::uint64_t bytes = 0;
  std::uint16_t device = 0;
  bool exported = false;
};

struct Runtime {
  Config config;
  RealDriver driver;
  AllocationTable table;
  KernelRegistry kernels;
  Telemetry telemetry;

  /// Serialises allocation bookkeeping with its records and with daemon attach (so an
  /// allocation is announced exactly once). Never taken on the launch path.
  std::mutex tracker_mu;
  std::uint64_t next_allocation_id = 1;                      // guarded by tracker_mu
  std::unordered_map<std::uint64_t, VmmHandle> vmm_handles;  // guarded by tracker_mu

  std::atomic<std::uint64_t> device_live[kMaxDevices] = {};
  std::atomic<std::uint64_t> device_peak[kMaxDevices] = {};
  std::atomic<std::uint64_t> total_live{0};
  std::atomic<std::uint64_t> total_peak{0};

  /// Streams currently capturing (begin/end seen through our wrappers). While zero, launches
  /// skip cuStreamIsCapturing altogether.
  std::atomic<std::int64_t> active_captures{0};
  /// Set by the client thread from SegmentHeader::control_flags (kControlDisabled).
  std::atomic<bool> daemon_disabled{false};
  std::atomic<bool> client_started{false};
};

extern std::atomic<int> g_mode;
extern Runtime* g_runtime;
inline Runtime& GetRuntime() { return *g_runtime; }
void InitSlow();
void StartClientIfNeeded();

/// Entry of every wrapper: counts the call and makes sure the shim is initialised.
inline Runtime& Enter(SymbolId id) {
  CountCall(id);
  if (__builtin_expect(g_mode.load(std::memory_order_acquire) == 0, 0)) InitSlow();
  return GetRuntime();
}

/// True when calls should be tracked (not CHAMELEON_DISABLE). The daemon's kControlDisabled
/// stops op records (RecordingOps) but not allocation tracking, so its table stays right.
inline bool Tracking(const Runtime&) {
  return g_mode.load(std::memory_order_relaxed) == static_cast<int>(Mode::kTracking);
}

/// The real entry point for `id`, typed.
template <typename Fn>
inline Fn Real(const Runtime& rt, SymbolId id) {
  return reinterpret_cast<Fn>(rt.driver.fns[id]);
}

}  // namespace chameleon::shim
