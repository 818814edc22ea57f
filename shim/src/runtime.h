// Process-wide state of the shim: configuration, the real driver, the allocation table, kernel
// tokens and telemetry, and the byte counters the tracker keeps. Initialising it, and starting the
// daemon client and the executor, is init.h's job (the top layer, docs/shim.md "Layers").
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
  /// The second stage of initialisation ran (init.h, StartDaemonClient): the client thread is
  /// started, or the process will have none (pass-through, CHAMELEON_TELEMETRY=0).
  std::atomic<bool> client_started{false};

  /// fork: takes the slow-path locks in the parent (none may be held by another thread across
  /// fork), releases them in the parent again afterwards.
  void LockForFork();
  void UnlockAfterFork();
  /// In the child: releases those locks and forgets the parent's allocations, segment and
  /// counters (the segment is MAP_SHARED: the child must never write into it).
  void ResetInForkChild();
};

extern std::atomic<int> g_mode;
extern Runtime* g_runtime;
inline Runtime& GetRuntime() { return *g_runtime; }

/// True when calls should be tracked (not CHAMELEON_DISABLE). The daemon's kControlDisabled
/// stops op records (RecordingOps, op_path.h) but not allocation tracking, so its table stays
/// right.
inline bool Tracking(const Runtime&) {
  return g_mode.load(std::memory_order_relaxed) == static_cast<int>(Mode::kTracking);
}

/// The real entry point for `id`, typed.
template <typename Fn>
inline Fn Real(const Runtime& rt, SymbolId id) {
  return reinterpret_cast<Fn>(rt.driver.fns[id]);
}

}  // namespace chameleon::shim
