// The op paths (Begin*/End*, docs/shim.md "Performance"): the ops' state between the driver call's
// two sides, and the inline halves, what every op pays, inlined into the exported wrappers so that
// a launch makes no call of its own besides the driver and the ring push. The rare and the
// executor's parts stay out of line in ops.cc.
//
// Layer (docs/shim.md, "Layers"): the op path, called by the wrappers, calling the executor.
//
// Thread-safety: everything here may run on any thread at once (the state is the caller's op).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstring>

#include "chameleon/ipc/event_records.h"
#include "executor.h"
#include "lookup_cache.h"
#include "runtime.h"

namespace chameleon::shim {

/// The stream value the shim records and queries: a per-thread-flavoured call on the null stream
/// means the per-thread default stream, which has its own handle value.
inline CUstream EffectiveStream(CUstream stream, bool per_thread) {
  return (stream == nullptr && per_thread) ? CU_STREAM_PER_THREAD : stream;
}

/// True when ops should be recorded now (a daemon is attached and has not disabled us). A pure
/// predicate: two relaxed loads. The daemon client is started by initialisation (init.h).
inline bool RecordingOps(const Runtime& rt) {
  return rt.telemetry.active() && !rt.daemon_disabled.load(std::memory_order_relaxed);
}

/// True while `stream` captures a graph. Free unless some stream is capturing.
bool StreamCapturingSlow(const Runtime& rt, CUstream stream);
inline bool StreamCapturing(const Runtime& rt, CUstream stream) {
  if (__builtin_expect(rt.active_captures.load(std::memory_order_relaxed) <= 0, 1)) return false;
  return StreamCapturingSlow(rt, stream);
}

// --- Ops: Begin* before forwarding to the driver, End* after it succeeded. -------------------
// Begin collects the op's tensors (the tracked allocations its arguments point into) and, with the
// swap executor on, runs the policy's triggers and the safety net before the op can run. A
// Begin result other than CUDA_SUCCESS means "do not forward; return this". End pushes the record
// (daemon attached) and runs the policy's swap-outs and the iteration boundary. With neither a
// daemon nor the executor, Begin returns at once and End does nothing.
//
// Cost (docs/benchmarks.md, shim_bench): the op structs are plain locals of the wrapper; Begin
// fills them with a handful of stores (the scan keeps its counters in registers), End reads
// them back once. Executor off: one extra load and branch per op over the recording path.

/// State shared by every kind of op between Begin and End.
struct PendingOp {
  bool active = false;     ///< recording or executing: End has work
  bool recording = false;  ///< a daemon is attached and has not disabled us
  bool capture = false;    ///< the stream captures a graph: no records counted, no executor
  Executor* ex = nullptr;  ///< the swap executor, when on
  ExecOp exec;
  std::uint32_t token = 0;
  CUstream stream = nullptr;
  std::uint64_t timer = 0;  ///< OpTimer handle (a detailed iteration times the op), 0 = none
};

/// A launch: the LaunchRecord (two words) followed by the tensor ids, so the ring gets one
/// contiguous copy, and each tensor's state for the executor. The arrays are written only up to
/// `count` (never zero-filled: a launch must not pay for 1 KiB of stores).
struct LaunchOp : PendingOp {
  static constexpr std::size_t kHeadWords = sizeof(ipc::LaunchRecord) / sizeof(std::uint64_t);
  std::uint16_t count = 0;
  std::uint16_t device = 0;
  std::uint64_t words[kHeadWords + ipc::kMaxLaunchTensors];
  AllocationState* states[ipc::kMaxLaunchTensors];
  std::uint64_t* ids() { return words + kHeadWords; }
};

/// A copy or memset: at most two tensors (source then destination, the daemon's order).
struct CopyOp : PendingOp {
  ipc::RecordType type = ipc::RecordType::kCopy;
  ipc::CopyRecord copy{};
  ipc::MemsetRecord memset_rec{};
  AllocationState* states[2] = {};
  std::uint32_t count = 0;
};

// BeginLaunch / EndLaunch: inline, in op_path.h.
CUresult BeginGraphLaunch(Runtime& rt, CUstream stream, PendingOp* op);
void EndGraphLaunch(Runtime& rt, PendingOp* op);
/// `token` 0 = decide the direction from which side is tracked (unified/peer copies).
CUresult BeginCopy(Runtime& rt, std::uint32_t token, std::uint64_t src, std::uint64_t dst,
                   std::uint64_t bytes, CUstream stream, bool peer, CopyOp* op);
CUresult BeginMemset(Runtime& rt, std::uint64_t dst, std::uint64_t bytes, CUstream stream,
                     CopyOp* op);
void EndCopy(Runtime& rt, CopyOp* op);
void OnSync(Runtime& rt, ipc::SyncKind kind, CUstream stream);

}  // namespace chameleon::shim

namespace chameleon::shim::op_path {

// Values below this are small integers, never device addresses.
constexpr std::uint64_t kMinAddress = 1ull << 16;
// 8-byte words a launch scans at most (bounded hot-path cost; more tensors are dropped).
constexpr std::uint32_t kScanBudgetWords = 256;

// The tensors one launch names, collected into `ids`/`states` (the LaunchOp's arrays). The
// counters are a local of BeginLaunch (registers, not the LaunchOp): the table's acquire loads
// would otherwise force a reload of every LaunchOp field after each lookup.
struct Collector {
  std::uint64_t* ids;
  AllocationState** states;
  LookupCache* cache;     ///< this thread's (lookup_cache.h)
  std::uint64_t version;  ///< the table's, loaded before the first lookup
  std::uint32_t count = 0;
  std::uint32_t budget = kScanBudgetWords;
  std::uint16_t device = 0;
};

[[gnu::always_inline]] inline void AddCandidate(const Runtime& rt, std::uint64_t value,
                                                Collector& c) {
  if (value < kMinAddress) return;
  const AllocationHit hit = c.cache->Lookup(rt.table, c.version, value);
  if (hit.id == 0) return;
  for (std::uint32_t i = 0; i < c.count; ++i) {
    if (c.ids[i] == hit.id) return;
  }
  if (c.count == ipc::kMaxLaunchTensors) return;
  if (c.count == 0) c.device = hit.device;
  c.ids[c.count] = hit.id;
  c.states[c.count] = hit.state;
  ++c.count;
}

[[gnu::always_inline]] inline void ScanWords(const Runtime& rt, const unsigned char* p,
                                             std::uint32_t bytes, Collector& c) {
  std::uint32_t words = bytes / 8;
  if (words > c.budget) words = c.budget;
  c.budget -= words;
  for (std::uint32_t w = 0; w < words; ++w) {
    std::uint64_t v;
    std::memcpy(&v, p + 8 * w, sizeof(v));
    AddCandidate(rt, v, c);
  }
}

// kernelParams with a known layout: only the pointer-sized parameters. The common case.
[[gnu::always_inline]] inline void ScanParams(const Runtime& rt, const KernelInfo& info,
                                              void** params, Collector& c) {
  const std::uint32_t pointer_count = info.pointer_count;
  for (std::uint32_t k = 0; k < pointer_count; ++k) {
    const PointerParam& p = info.pointers[k];
    const void* value = params[p.index];
    if (value != nullptr) ScanWords(rt, static_cast<const unsigned char*>(value), p.size, c);
  }
}

/// `extra` (a packed parameter buffer): rare, out of line (ops.cc). Takes and returns the
/// collector by value, so that the caller's stays in registers.
Collector ScanExtra(const Runtime& rt, const KernelInfo* info, void** extra, Collector c);

// Common start of every op: what End will have to do. False when nothing (no daemon, no
// executor): the op is then forwarded untouched.
[[gnu::always_inline]] inline bool BeginCommon(Runtime& rt, CUstream stream, PendingOp* op) {
  const bool recording = RecordingOps(rt);
  Executor* const ex = ExecutorIfOn();
  if (!recording && ex == nullptr) return false;
  op->active = true;
  op->recording = recording;
  op->ex = ex;
  op->stream = stream;
  op->capture = StreamCapturing(rt, stream);
  return true;
}

[[gnu::always_inline]] inline CUresult ExecBefore(PendingOp* op, AllocationState* const* states,
                                                  std::uint32_t n,
                                                  const OpExtent* extents = nullptr) {
  // Nothing may be added to a capturing stream, and its ops do not run now.
  if (op->ex == nullptr || op->capture) return CUDA_SUCCESS;
  return ExecutorBeforeOp(*op->ex, op->token, op->stream, states, n, &op->exec, extents);
}

/// Begin's last step: in a detailed iteration, the op's start event (after the executor's waits,
/// which are not the op's time). One relaxed load otherwise.
[[gnu::always_inline]] inline CUresult StartTimer(Runtime& rt, PendingOp* op, CUresult before) {
  if (__builtin_expect(rt.telemetry.op_timer().armed(), 0) && before == CUDA_SUCCESS &&
      !op->capture) {
    op->timer = rt.telemetry.op_timer().Start(op->stream);
  }
  return before;
}

/// End's step after the push: the op's closing event (`detailed_op` from PushOp).
[[gnu::always_inline]] inline void StopTimer(Runtime& rt, PendingOp* op,
                                             std::uint32_t detailed_op) {
  if (__builtin_expect(op->timer != 0, 0)) {
    rt.telemetry.op_timer().Stop(op->timer, detailed_op, op->stream);
  }
}

/// The executor's half of End (only called with the executor on, and only for an op that is an
/// after-anchor of the policy in force or completes a boundary; ops.cc).
std::uint64_t ExecAfterSlow(PendingOp* op, AllocationState* const* states, std::uint32_t n,
                            bool boundary);

/// `boundary`: the op completed an iteration boundary. Returns the policy generation the
/// executor installed for the iteration that starts there (0: no boundary, no executor, or no
/// policy yet).
[[gnu::always_inline]] inline std::uint64_t ExecAfter(PendingOp* op, AllocationState* const* states,
                                                      std::uint32_t n, bool boundary) {
  if (op->ex == nullptr) return 0;
  // Steady state: no trigger after this op (one bit of the token's bitmap) and no boundary.
  if (__builtin_expect(!boundary && !ExecutorAfterOpDue(*op->ex, op->token, op->exec), 1)) return 0;
  return ExecAfterSlow(op, states, n, boundary);
}

/// After ExecAfter at a boundary: pushes the IterationMark stamped with `installed` (the
/// executor's generation for the iteration that starts; the header's figure when 0), so the
/// daemon credits a new candidate's first iteration to it (docs/protocol.md). Out of line: once
/// per iteration. `ex` (null when off): its measured waits go with the mark.
void FinishBoundary(Runtime& rt, BoundaryHit hit, std::uint64_t installed, const Executor* ex,
                    CUstream stream, bool capture);

}  // namespace chameleon::shim::op_path

namespace chameleon::shim {

[[gnu::always_inline]] inline CUresult BeginLaunch(Runtime& rt, const void* function,
                                                   CUstream stream, void** params, void** extra,
                                                   LaunchOp* t) {
  using namespace op_path;
  if (!BeginCommon(rt, stream, t)) return CUDA_SUCCESS;
  const KernelInfo* info = rt.kernels.Find(function);
  if (__builtin_expect(info == nullptr, 0)) info = rt.kernels.Register(function, rt.driver.aux);
  t->token = info != nullptr ? info->token : ipc::kTokenUnknown;
  Collector c{t->ids(), t->states, &ThreadLookupCache(), rt.table.version()};
  if (params != nullptr) {
    if (info != nullptr && info->layout_known) ScanParams(rt, *info, params, c);
  } else if (extra != nullptr) {
    c = ScanExtra(rt, info, extra, c);
  }
  t->count = static_cast<std::uint16_t>(c.count);
  t->device = c.device;
  return StartTimer(rt, t, ExecBefore(t, t->states, c.count));
}

[[gnu::always_inline]] inline void EndLaunch(Runtime& rt, LaunchOp* t) {
  if (!t->active) return;
  bool boundary = false;
  BoundaryHit hit;
  const std::uint32_t count = t->count;
  if (t->recording) {
    ipc::LaunchRecord rec{};
    rec.token = t->token;
    rec.tensor_count = static_cast<std::uint16_t>(count);
    rec.device = t->device;
    rec.stream = reinterpret_cast<std::uint64_t>(t->stream);
    std::memcpy(t->words, &rec, sizeof(rec));
    std::uint32_t detailed_op = OpTimer::kNotDetailed;
    boundary = rt.telemetry.PushOp(ipc::RecordType::kLaunch, rec.token, rec.device, t->words,
                                   sizeof(rec) + sizeof(std::uint64_t) * count, nullptr, 0,
                                   t->capture, &hit, &t->exec.ticket, &detailed_op);
    op_path::StopTimer(rt, t, detailed_op);
  }
  const std::uint64_t installed = op_path::ExecAfter(t, t->states, count, boundary);
  if (__builtin_expect(boundary, 0)) {
    op_path::FinishBoundary(rt, hit, installed, t->ex, t->stream, t->capture);
  }
}

}  // namespace chameleon::shim
