// Helpers shared by the wrapper files: the export macro and the op-recording paths.
#pragma once

#include <cuda.h>

#include "chameleon/ipc/event_records.h"
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
bool StreamCapturing(const Runtime& rt, CUstream stream);

void OnLaunch(Runtime& rt, const void* function, CUstream stream, void** params, void** extra);
void OnGraphLaunch(Runtime& rt, CUstream stream);
void OnCopy(Runtime& rt, std::uint32_t token, std::uint64_t src, std::uint64_t dst,
            std::uint64_t bytes, CUstream stream);
/// Unified/peer copies: the direction token comes from which side is tracked.
void OnCopyAuto(Runtime& rt, std::uint64_t src, std::uint64_t dst, std::uint64_t bytes,
                CUstream stream, bool peer);
void OnMemset(Runtime& rt, std::uint64_t dst, std::uint64_t bytes, CUstream stream);
void OnSync(Runtime& rt, ipc::SyncKind kind, CUstream stream);

}  // namespace chameleon::shim
