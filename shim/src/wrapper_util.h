// Helpers shared by the wrapper files: the export macro and the op-recording paths.
#pragma once

#include <cuda.h>

#include "chameleon/ipc/event_records.h"
#include "executor.h"
#include "runtime.h"

/// Defines an exported wrapper whose symbol is exactly NAME (an asm label, so cuda.h's
/// `#define cuMemAlloc cuMemAlloc_v2` style macros cannot interfere) and whose C++ name is W_NAME.
#define CHAMELEON_WRAPPER(NAME, PARAMS)                                                      \
  extern "C" __attribute__((visibility("default"))) CUresult W_##NAME PARAMS __asm__(#NAME); \
  extern "C" CUresult W_##NAME PARAMS

/// Forward to the real entry point or report a missing driver.
#define CHAMELEON_REAL(RT, NAME, TYPE)     \
  auto real = Real<TYPE>(RT, kSym_##NAME); \
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED

namespace chameleon::shim {

/// The stream value the shim records and queries: a per-thread-flavoured call on the null stream
/// means the per-thread default stream, which has its own handle value.
inline CUstream EffectiveStream(CUstream stream, bool per_thread) {
  return (stream == nullptr && per_thread) ? CU_STREAM_PER_THREAD : stream;
}

/// True when ops should be recorded now (a daemon is attached and has not disabled us).
/// Starts the client on the first tracked call. Two relaxed loads once running.
inline bool RecordingOps(Runtime& rt) {
  if (__builtin_expect(!rt.client_started.load(std::memory_order_relaxed), 0)) {
    StartClientIfNeeded();
  }
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
