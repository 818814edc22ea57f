// The swap executor inside the shim: the SwapEngine and PolicyRunner it owns, and the entry
// points the op path and the memory wrappers call (docs/shim.md, "Swap executor"; the mechanism
// is docs/executor.md).
//
// Layer (docs/shim.md, "Layers"): below the op path, above the swap engine. It knows nothing of
// the tracker, the telemetry or the daemon client: initialisation (init.cc) decides whether it is
// on and builds it (CreateExecutor) from the configuration, the driver, the allocation table and
// an ExecutorUplink for what it must tell the layers above; the daemon client reaches it only
// through the PolicySink it is given (ExecutorPolicySink).
//
// Hot path (every launch/copy/memset while on): one acquire load of g_executor, one acquire
// load of each tensor's flags word; with a policy in force, a few plain loads of the runner's
// tables (its mutex only when a trigger is due); the engine's mutex only when a flag bit says a
// tensor is swapped out or in flight.
//
// Thread-safe: every function may be called from any thread.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "alloc_table.h"
#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/policy_blob.h"
#include "config.h"
#include "executor_stats.h"
#include "policy_sink.h"
#include "program_vmm.h"
#include "real_driver.h"
#include "swap/counters.h"
#include "swap/policy_runner.h"
#include "swap/swap_engine.h"

namespace chameleon::shim {

/// What the executor tells, or asks of, the layers above it (the op path implements it:
/// pointer_report.h). Called from the pointer-table scan only, never from the op hot path.
class ExecutorUplink {
 public:
  virtual ~ExecutorUplink() = default;
  /// Detailed iterations finished so far: a boundary scan runs again after each.
  virtual std::uint64_t DetailedIterationsDone() const = 0;
  /// Scan `scan` found `targets` pointed to by device-side tables (the daemon is told).
  virtual void PointerTargetsFound(std::uint64_t scan, std::span<const CUdeviceptr> targets) = 0;
};

/// What the executor is built from, gathered by initialisation (init.cc). Pointers outlive it.
struct ExecutorEnv {
  const Config* config = nullptr;
  const RealDriver* driver = nullptr;
  /// A daemon is attached or its socket exists: on even without CHAMELEON_DEVICE_LIMIT.
  bool daemon = false;
  AllocationTable* table = nullptr;                 ///< the op path's tensors (lookups and scans)
  const std::atomic<bool>* ops_disabled = nullptr;  ///< the daemon's kControlDisabled
  const std::atomic<std::int64_t>* active_captures = nullptr;  ///< streams capturing a graph
  ExecutorUplink* uplink = nullptr;
};

struct Executor {
  int device = 0;                      ///< the one device served; other devices pass through
  std::uint64_t min_bytes = 2u << 20;  ///< smaller allocations pass through
  bool limit_from_env = false;         ///< own_limit is CHAMELEON_DEVICE_LIMIT (else device memory)
  /// CHAMELEON_DEVICE_LIMIT, else the device's memory: a daemon's limit only ever lowers it.
  std::uint64_t own_limit = 0;
  bool apply_policy = true;  ///< CHAMELEON_SWAP_POLICY=off: safety net only
  swap::SwapCounters counters;
  /// Device bytes of passed-through allocations and the program's own cuMemCreate on `device`,
  /// counted against the limit (the engine reads it).
  std::atomic<std::uint64_t> passthrough_live{0};
  std::atomic<std::uint64_t> frees{0};  ///< engine frees, to flush unmaps every so often
  /// CHAMELEON_EVICTION=belady: each op's tensors are recorded for the safety net's next-use rule.
  bool record_uses = true;
  /// Ops since the iteration boundary (plain load + store: launching threads racing may lose a
  /// count, which only blurs the Belady rule's positions).
  std::atomic<std::uint32_t> op_position{0};
  /// The uses of this iteration are not recorded (ExecutorBoundary decides, docs/executor.md
  /// "The recorded sequence"): a policy in force ran the last iteration without evicting.
  std::atomic<bool> uses_paused{false};
  std::uint64_t evictions_seen = 0;  ///< evictions counter at the last boundary (runner_mu)
  std::unique_ptr<swap::SwapEngine> engine;
  std::unique_ptr<swap::PolicyRunner> runner;
  std::mutex runner_mu;  ///< serialises boundaries and stats-file writes (never taken per op)
  std::atomic<bool> runner_active{false};
  swap::DriverApi api;  ///< the real driver's entry points (also used by the pointer-table scan)
  bool pointer_scan = true;                ///< CHAMELEON_POINTER_SCAN
  std::mutex scan_mu;                      ///< serialises ExecutorPointerScan
  std::atomic<std::uint64_t> scans{0};     ///< pointer-table scans run (written under scan_mu)
  std::uint64_t boundary_scans = 0;        ///< of which at boundaries (scan_mu)
  std::atomic<std::uint64_t> pressure{0};  ///< allocations that may evict
  std::uint64_t scanned_detail = 0;        ///< uplink's DetailedIterationsDone at the last one
  StatsFile stats_file;                    ///< CHAMELEON_STATS_FILE (written under runner_mu)
  // The layers above, as ExecutorEnv gave them.
  AllocationTable* table = nullptr;
  const std::atomic<bool>* ops_disabled = nullptr;
  const std::atomic<std::int64_t>* active_captures = nullptr;
  ExecutorUplink* uplink = nullptr;
};

/// The process's executor once initialisation decided it is on (init.cc publishes it).
extern std::atomic<Executor*> g_executor;

/// The executor when it is on and decided; never decides. The launch path's check.
inline Executor* ExecutorIfOn() { return g_executor.load(std::memory_order_acquire); }
/// Builds the executor, or null when it stays off (every reason logged once): on when
/// CHAMELEON_DEVICE_LIMIT is a valid byte count or `env.daemon`; then the limit is the device's
/// total memory until the daemon's policy names one. Called once per process, by init.cc.
Executor* CreateExecutor(const ExecutorEnv& env);
/// Fork child: the parent's CUDA objects are not ours; the child passes memory through.
void ExecutorForgetAfterFork();

/// The daemon client's PolicySink: policies go to, and figures come from, the executor in
/// `slot` when one is on; none before the decision. Thread-safe.
class ExecutorPolicySink final : public PolicySink {
 public:
  explicit ExecutorPolicySink(const std::atomic<Executor*>* slot) : slot_(slot) {}
  bool SetPolicy(const ipc::Policy& policy) override;
  std::uint64_t DeviceLimit() const override;
  std::uint64_t OwnLimit() const override;
  void PublishCounters(ipc::SegmentHeader* header) const override;

 private:
  Executor* On() const { return slot_->load(std::memory_order_acquire); }
  const std::atomic<Executor*>* slot_;
};

// --- memory wrappers -------------------------------------------------------------------------

/// True when an allocation of `bytes` on `device` (the calling thread's) goes through the engine.
bool ExecutorServes(const Executor& ex, std::uint16_t device, std::uint64_t bytes);
/// An executor allocation: `*dptr` and the engine's `*id`. The caller tracks it, then hands its
/// state to ExecutorAttach.
CUresult ExecutorAllocate(Executor& ex, CUdeviceptr* dptr, std::uint64_t bytes, CUstream stream,
                          swap::AllocId* id);
/// Joins the engine's allocation `id` to its tracked state `s` (the flags the launch path tests),
/// last used on `stream_value`. A null `s` (the table is full) pins it: no op could name it.
void ExecutorAttach(Executor& ex, swap::AllocId id, AllocationState* s, std::uint64_t stream_value);
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
/// A free: true (and `*result`) when `dptr` was the executor's (the caller then tracks the free).
/// False for anything else, with `*passthrough` filled when it is a tracked allocation the caller
/// frees through the driver (ExecutorPassthrough once that succeeded).
bool ExecutorFree(Executor& ex, CUdeviceptr dptr, CUstream stream, CUresult* result,
                  PassthroughFree* passthrough);
/// cuMemGetInfo under a limit: total = limit, free = limit - in use (never negative).
void ExecutorMemInfo(Executor& ex, size_t* free_bytes, size_t* total_bytes);
/// IPC / shareable export of the allocation containing `address`: never swapped again.
void ExecutorPin(Executor& ex, std::uint64_t address);
/// After a synchronisation (stream, context): pending unmaps whose copies completed can go.
void ExecutorAfterSync(Executor& ex);

// --- ops ----------------------------------------------------------------------------------

/// Per-op state carried from ExecutorBeforeOp to ExecutorAfterOp.
struct ExecOp {
  bool runner = false;
  swap::OccurrenceTicket ticket;  ///< the op's ring-order occurrence (telemetry's PushOp)
};

/// Before an op is forwarded: the policy's triggers anchored before it, then the safety net for
/// its tensors (`states`, in record order). A result other than CUDA_SUCCESS means the op must
/// not be forwarded (its tensors cannot be made resident) and the wrapper returns it.
/// `extents` (copies, memsets; null for launches): the bytes touched through each of `states`.
/// Inline: with a policy in force and the op's tensors resident, what every op pays (the
/// runner's trigger check, the use record, one flags load per tensor) without a call; the rest
/// (swapped or program-VMM tensors, warm-up) in ExecutorBeforeOpSlow.
inline CUresult ExecutorBeforeOp(Executor& ex, std::uint32_t token, CUstream stream,
                                 AllocationState* const* states, std::uint32_t n, ExecOp* op,
                                 const OpExtent* extents = nullptr);
CUresult ExecutorBeforeOpSlow(Executor& ex, CUstream stream, AllocationState* const* states,
                              std::uint32_t n, const ExecOp& op, const OpExtent* extents,
                              std::uint32_t bits);
/// True when the op (ExecutorBeforeOp's `op`, its ring ticket filled in by the push) is an
/// after-anchor of the policy in force: only then is ExecutorAfterOp entered. Inline, lock-free:
/// the token's after-anchor bitmap (policy_runner.h).
inline bool ExecutorAfterOpDue(const Executor& ex, std::uint32_t token, const ExecOp& op) {
  return op.runner && ex.runner->HasAfterTrigger(token, op.ticket);
}
/// After a successfully forwarded op: the policy's swap-outs anchored on it.
void ExecutorAfterOp(Executor& ex, std::uint32_t token, CUstream stream,
                     AllocationState* const* states, std::uint32_t n, const ExecOp& op);
/// An iteration boundary (after the boundary op's AfterOp): installs a new policy generation.
/// Returns the generation in force for the iteration that starts (0: none yet), which the
/// boundary's IterationMark carries (docs/protocol.md).
std::uint64_t ExecutorBoundary(Executor& ex);
/// The virtual ns streams have waited for the executor in total: for swap-ins before their
/// consumers, for fault-ins and for chunks at allocations (swap_in_wait_ns + fault_in_wait_ns +
/// alloc_wait_ns). False when the
/// driver has no virtual clocks (a real GPU): nothing is measured then.
bool ExecutorWaitNs(const Executor& ex, std::uint64_t* ns);
/// Samples the live allocations for device-side pointer tables (copies on `stream`) and pins
/// their targets (kNeverSwap + ExecutorPin); docs/executor.md, "Pointer tables". `boundary`:
/// called at a boundary, before ExecutorBoundary (never on a capturing stream) — scans at the
/// first boundary and after each detailed iteration, one compare otherwise. Not `boundary`
/// (the allocation paths, before allocations that may evict): scans.
void ExecutorPointerScan(Executor& ex, CUstream stream, bool boundary);

// --- statistics -------------------------------------------------------------------------------

/// At exit: the CHAMELEON_STATS_FILE record of the span since the last boundary (nothing when
/// the executor is off or no file is configured).
void ExecutorWriteExitStats();

// The op position and the op's engine tensors, for the Belady eviction rule
// (swap/use_history.h). Launch path: plain loads and stores, no read-modify-write.
[[gnu::always_inline]] inline void ExecutorRecordUses(Executor& ex, AllocationState* const* states,
                                                      std::uint32_t n) {
  const std::uint32_t position = ex.op_position.load(std::memory_order_relaxed);
  ex.op_position.store(position + 1, std::memory_order_relaxed);
  if (ex.uses_paused.load(std::memory_order_relaxed)) {
    ex.engine->NotePosition(position);  // the Belady rule's "now" (a use record's ~4 ns saved)
    return;
  }
  swap::AllocId ids[ipc::kMaxLaunchTensors];
  std::uint32_t m = 0;
  for (std::uint32_t i = 0; i < n && m < ipc::kMaxLaunchTensors; ++i) {
    if (const swap::AllocId id = IdOf(states[i])) ids[m++] = id;
  }
  if (m != 0) ex.engine->RecordUses(position, ids, m);
}

[[gnu::always_inline]] inline CUresult ExecutorBeforeOp(Executor& ex, std::uint32_t token,
                                                        CUstream stream,
                                                        AllocationState* const* states,
                                                        std::uint32_t n, ExecOp* op,
                                                        const OpExtent* extents) {
  op->runner = false;
  if (ex.runner_active.load(std::memory_order_relaxed) &&
      !ex.ops_disabled->load(std::memory_order_relaxed)) {
    ex.runner->BeforeOp(token, stream);
    op->runner = true;
  }
  if (ex.record_uses) ExecutorRecordUses(ex, states, n);
  std::uint32_t bits = 0;
  for (std::uint32_t i = 0; i < n; ++i) bits |= states[i]->flags.load(std::memory_order_acquire);
  // Steady state under a policy: every tensor resident, nothing else to do.
  if (__builtin_expect(op->runner && (bits & (kProgramVmmPage | kSwappedOut | kSwapInFlight)) == 0,
                       1)) {
    return CUDA_SUCCESS;
  }
  return ExecutorBeforeOpSlow(ex, stream, states, n, *op, extents, bits);
}

}  // namespace chameleon::shim
