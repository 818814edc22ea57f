// The few functions libchameleon.so exports besides the driver API and dlsym (all prefixed
// chameleon_). Tests, benchmarks and tools look them up with dlsym; a program never needs them.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Counters of the shim in this process. Fields are only appended; `struct_bytes` says how many
/// the library filled.
struct ChameleonShimStats {
  uint64_t struct_bytes;
  uint64_t mode;       ///< 0 uninitialised, 1 pass-through, 2 tracking
  uint64_t connected;  ///< 1 while attached to a daemon
  uint64_t client_id;  ///< from WELCOME
  uint64_t connects;   ///< successful handshakes so far
  uint64_t records_written;
  uint64_t records_dropped;   ///< ring full or producer lock busy
  uint64_t allocations_live;  ///< entries in the allocation table
  uint64_t bytes_live;        ///< device bytes live, all devices
  uint64_t bytes_peak;
  uint64_t lookup_give_ups;  ///< hot-path lookups that lost to a writer repeatedly
  uint64_t iterations;       ///< boundary signatures seen
  uint64_t detail_done_seq;
  uint64_t policy_generation;
  uint64_t active_captures;
  uint64_t daemon_disabled;  ///< 1 while the daemon's control_flags say kControlDisabled
  // --- swap executor (docs/shim.md, "Swap executor"); zero while it is off ---
  uint64_t executor_on;         ///< 1 when the swap executor serves allocations
  uint64_t device_limit_bytes;  ///< the limit in force
  uint64_t swap_out_bytes;
  uint64_t swap_in_bytes;
  uint64_t fault_ins;    ///< safety-net synchronous swap-ins
  uint64_t evictions;    ///< OOM evictions (closest size)
  uint64_t stall_count;  ///< host waits by the executor
  uint64_t stall_ns;
  uint64_t prefetch_hits;
  uint64_t prefetch_misses;
  uint64_t vmm_calls;
  uint64_t chunk_bytes;                ///< physical chunk bytes created (in use + pooled)
  uint64_t policy_generation_applied;  ///< generation the runner has in force
  uint64_t policy_ignored;
  uint64_t executor_iterations;  ///< iteration boundaries the executor saw
};

/// Calls of the exported entry point `symbol` (exact exported name) made in this process through
/// the shim; 0 for names the shim does not export.
uint64_t chameleon_shim_call_count(const char* symbol);
/// Fills `out` (up to `bytes`); returns 0, or -1 on a null argument.
int chameleon_shim_get_stats(struct ChameleonShimStats* out, size_t bytes);
/// Live and peak device bytes the shim counted for `device`; -1 when out of range.
int chameleon_shim_device_bytes(int device, uint64_t* live, uint64_t* peak);

typedef uint64_t (*ChameleonShimCallCountFn)(const char*);
typedef int (*ChameleonShimGetStatsFn)(struct ChameleonShimStats*, size_t);

#ifdef __cplusplus
}
#endif
