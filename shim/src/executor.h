// The swap executor inside the shim: whether it is on (decided once, at the process's first
// allocation call), the SwapEngine and PolicyRunner it owns, and the entry points the wrappers
// call (docs/shim.md, "Swap executor"; the mechanism is docs/executor.md).
//
// On when CHAMELEON_DEVICE_LIMIT is a valid byte count, or when a daemon is present at that first
// allocation (connected by the synchronous first attempt, or its socket exists): then the limit
// is the device's total memory until the daemon's policy names one. Otherwise the shim stays a
// pure pass-through for memory and ops. The decision never changes for the process.
//
// Hot path (every launch/copy/memset while on): one acquire load of g_executor, one acquire
// load of each tensor's flags word; the runner's mutex only while a policy with entries is in
// force; the engine's mutex only when a flag bit says a tensor is swapped out or in flight.
//
// Thread-safe: every function may be called from any thread.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "alloc_table.h"
#include "chameleon/ipc/policy_blob.h"
#include "executor_stats.h"
#include "program_vmm.h"
#include "swap/counters.h"
#include "swap/policy_runner.h"
#include "swap/swap_engine.h"

namespace chameleon::shim {

struct Runtime;

struct Executor {
  int device = 0;                      ///< the one device served; other devices pass through
  std::uint64_t min_bytes = 2u << 20;  ///< smaller allocations pass through
  bool limit_from_env = false;         ///< CHAMELEON_DEVICE_LIMIT: the daemon's never replaces it
  bool apply_policy = true;            ///< CHAMELEON_SWAP_POLICY=off: safety net only
  swap::SwapCounters counters;
  /// Device bytes of passed-through allocations and the program's own cuMemCreate on `device`,
  /// counted against the limit (the engine reads it).
  std::atomic<std::uint64_t> passthrough_live{0};
  std::atomic<std::uint64_t> frees{0};  ///< engine frees, to flush unmaps every so often
  std::unique_ptr<swap::SwapEngine> engine;
  std::unique_ptr<swap::PolicyRunner> runner;
  std::mutex runner_mu;  ///< serialises BeforeOp/AfterOp/BeginIteration
  std::atomic<bool> runner_active{false};
  swap::DriverApi api;  ///< the real driver's entry points (also used by the pointer-table scan)
  bool pointer_scan = true;                ///< CHAMELEON_POINTER_SCAN
  std::mutex scan_mu;                      ///< serialises ExecutorPointerScan
  std::atomic<std::uint64_t> scans{0};     ///< pointer-table scans run (written under scan_mu)
  std::uint64_t boundary_scans = 0;        ///< of which at boundaries (scan_mu)
  std::atomic<std::uint64_t> pressure{0};  ///< allocations that may evict
  std::uint64_t scanned_detail = 0;        ///< telemetry.detail_done() at the last one (scan_mu)
  StatsFile stats_file;                    ///< CHAMELEON_STATS_FILE (written under runner_mu)
};

extern std::atomic<Executor*> g_executor;

/// The executor when it is on and decided; never decides. The launch path's check.
inline Executor* ExecutorIfOn() { return g_executor.load(std::memory_order_acquire); }
/// The executor when on, deciding first if nobody has (allocation calls, cuMemGetInfo).
Executor* DecideExecutor(Runtime& rt);
/// Fork child: the parent's CUDA objects are not ours; the child passes memory through.
void ExecutorForgetAfterFork();

// --- memory wrappers -------------------------------------------------------------------------

/// True when an allocation of `bytes` on the calling thread's device goes through the engine.
bool ExecutorServes(Runtime& rt, const Executor& ex, std::uint64_t bytes);
/// An executor allocation, tracked like the driver's (kind/stream as the wrapper would record).
CUresult ExecutorAllocate(Runtime& rt, Executor& ex, CUdeviceptr* dptr, std::uint64_t bytes,
                          CUstream stream, std::uint8_t kind, std::uint64_t stream_value);
/// Before a passed-through allocation of `bytes`: makes room under the limit. False = refuse it
/// with CUDA_ERROR_OUT_OF_MEMORY.
bool ExecutorAdmit(Executor& ex, std::uint64_t bytes);
/// Accounting of passed-through device bytes on the executor's device (+ or -; other devices
/// are ignored).
void ExecutorPassthrough(Executor& ex, std::uint16_t device, std::uint64_t bytes, bool add);
/// What a free of a passed-through allocation must give back to the accounting.
struct PassthroughFree {
  std::uint64_t bytes = 0;
  std::uint16_t device = 0;
};
/// A free: true (and `*result`) when `dptr` was the executor's, which then tracked the free.
/// False for anything else, with `*passthrough` filled when it is a tracked allocation the caller
/// frees through the driver (ExecutorPassthrough once that succeeded).
bool ExecutorFree(Runtime& rt, Executor& ex, CUdeviceptr dptr, CUstream stream,
                  std::uint64_t stream_value, CUresult* result, PassthroughFree* passthrough);
/// cuMemGetInfo under a limit: total = limit, free = limit - in use (never negative).
void ExecutorMemInfo(Executor& ex, size_t* free_bytes, size_t* total_bytes);
/// IPC / shareable export of the allocation containing `address`: never swapped again.
void ExecutorPin(Runtime& rt, Executor& ex, std::uint64_t address);
/// After a synchronisation (stream, context): pending unmaps whose copies completed can go.
void ExecutorAfterSync(Executor& ex);

// --- ops ----------------------------------------------------------------------------------

/// Per-op state carried from ExecutorBeforeOp to ExecutorAfterOp.
struct ExecOp {
  bool runner = false;
  std::uint32_t occurrence = 0;
};

/// Before an op is forwarded: the policy's triggers anchored before it, then the safety net for
/// its tensors (`states`, in record order). A result other than CUDA_SUCCESS means the op must
/// not be forwarded (its tensors cannot be made resident) and the wrapper returns it.
/// `extents` (copies, memsets; null for launches): the bytes touched through each of `states`.
CUresult ExecutorBeforeOp(Runtime& rt, Executor& ex, std::uint32_t token, CUstream stream,
                          AllocationState* const* states, std::uint32_t n, ExecOp* op,
                          const OpExtent* extents = nullptr);
/// After a successfully forwarded op: the policy's swap-outs anchored on it.
void ExecutorAfterOp(Executor& ex, std::uint32_t token, CUstream stream,
                     AllocationState* const* states, std::uint32_t n, const ExecOp& op);
/// An iteration boundary (after the boundary op's AfterOp): installs a new policy generation.
void ExecutorBoundary(Executor& ex);
/// Samples the live allocations for device-side pointer tables (copies on `stream`) and pins
/// their targets (kNeverSwap + ExecutorPin); docs/executor.md, "Pointer tables". `boundary`:
/// called at a boundary, before ExecutorBoundary (never on a capturing stream) — scans at the
/// first boundary and after each detailed iteration, one compare otherwise. Not `boundary`
/// (the allocation paths, before allocations that may evict): scans.
void ExecutorPointerScan(Runtime& rt, Executor& ex, CUstream stream, bool boundary);

// --- client thread ----------------------------------------------------------------------------

/// A decoded policy from the daemon (ignored with CHAMELEON_SWAP_POLICY=off, but its device
/// limit still applies when CHAMELEON_DEVICE_LIMIT is not set).
void ExecutorSetPolicy(const ipc::Policy& policy);
/// The limit in force (0 when off or undecided): SegmentHeader::device_limit_bytes.
std::uint64_t ExecutorLimit();
/// At exit: the CHAMELEON_STATS_FILE record of the span since the last boundary (nothing when
/// the executor is off or no file is configured).
void ExecutorWriteExitStats();

}  // namespace chameleon::shim
