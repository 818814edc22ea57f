// Exported synchronisation and graph-capture entry points. Capture begin/end only maintain
// Runtime::active_captures so that launches can skip cuStreamIsCapturing while nothing captures.
#include "wrapper_util.h"

using namespace chameleon::shim;
namespace ipc = chameleon::ipc;

namespace {
using StreamSyncFn = CUresult (*)(CUstream);
using CtxSyncFn = CUresult (*)();
using CtxSyncV2Fn = CUresult (*)(CUcontext);
using BeginFn = CUresult (*)(CUstream, CUstreamCaptureMode);
using BeginToGraphFn = CUresult (*)(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*,
                                    size_t, CUstreamCaptureMode);
using EndFn = CUresult (*)(CUstream, CUgraph*);
}  // namespace

#define CHAMELEON_STREAM_SYNC(NAME, PT)                           \
  CHAMELEON_WRAPPER(NAME, (CUstream s)) {                         \
    Runtime& rt = EnterTracked(kSym_##NAME);                      \
    CHAMELEON_REAL(rt, NAME, StreamSyncFn);                       \
    const CUresult r = real(s);                                   \
    if (r == CUDA_SUCCESS && Tracking(rt))                        \
      OnSync(rt, ipc::SyncKind::kStream, EffectiveStream(s, PT)); \
    return r;                                                     \
  }
CHAMELEON_STREAM_SYNC(cuStreamSynchronize, false)
CHAMELEON_STREAM_SYNC(cuStreamSynchronize_ptsz, true)

CHAMELEON_WRAPPER(cuCtxSynchronize, ()) {
  Runtime& rt = EnterTracked(kSym_cuCtxSynchronize);
  CHAMELEON_REAL(rt, cuCtxSynchronize, CtxSyncFn);
  const CUresult r = real();
  if (r == CUDA_SUCCESS && Tracking(rt)) OnSync(rt, ipc::SyncKind::kContext, nullptr);
  return r;
}

// CUDA 13: synchronises a given context (null = current).
CHAMELEON_WRAPPER(cuCtxSynchronize_v2, (CUcontext ctx)) {
  Runtime& rt = EnterTracked(kSym_cuCtxSynchronize_v2);
  CHAMELEON_REAL(rt, cuCtxSynchronize_v2, CtxSyncV2Fn);
  const CUresult r = real(ctx);
  if (r == CUDA_SUCCESS && Tracking(rt)) OnSync(rt, ipc::SyncKind::kContext, nullptr);
  return r;
}

#define CHAMELEON_BEGIN_CAPTURE(NAME)                                                  \
  CHAMELEON_WRAPPER(NAME, (CUstream s, CUstreamCaptureMode mode)) {                    \
    Runtime& rt = Enter(kSym_##NAME);                                                  \
    CHAMELEON_REAL(rt, NAME, BeginFn);                                                 \
    const CUresult r = real(s, mode);                                                  \
    if (r == CUDA_SUCCESS) rt.active_captures.fetch_add(1, std::memory_order_relaxed); \
    return r;                                                                          \
  }
CHAMELEON_BEGIN_CAPTURE(cuStreamBeginCapture_v2)
CHAMELEON_BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz)

#define CHAMELEON_BEGIN_CAPTURE_TO_GRAPH(NAME)                                                  \
  CHAMELEON_WRAPPER(NAME, (CUstream s, CUgraph g, const CUgraphNode* deps,                      \
                           const CUgraphEdgeData* edges, size_t n, CUstreamCaptureMode mode)) { \
    Runtime& rt = Enter(kSym_##NAME);                                                           \
    CHAMELEON_REAL(rt, NAME, BeginToGraphFn);                                                   \
    const CUresult r = real(s, g, deps, edges, n, mode);                                        \
    if (r == CUDA_SUCCESS) rt.active_captures.fetch_add(1, std::memory_order_relaxed);          \
    return r;                                                                                   \
  }
CHAMELEON_BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph)
CHAMELEON_BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph_ptsz)

// End capture ends it whether or not the capture was valid (an invalidated capture returns an
// error but the stream leaves capture mode), so the count drops unless the stream still captures.
#define CHAMELEON_END_CAPTURE(NAME, PT)                           \
  CHAMELEON_WRAPPER(NAME, (CUstream s, CUgraph * graph)) {        \
    Runtime& rt = Enter(kSym_##NAME);                             \
    CHAMELEON_REAL(rt, NAME, EndFn);                              \
    const CUresult r = real(s, graph);                            \
    if (rt.active_captures.load(std::memory_order_relaxed) > 0 && \
        !StreamCapturing(rt, EffectiveStream(s, PT))) {           \
      rt.active_captures.fetch_sub(1, std::memory_order_relaxed); \
    }                                                             \
    return r;                                                     \
  }
CHAMELEON_END_CAPTURE(cuStreamEndCapture, false)
CHAMELEON_END_CAPTURE(cuStreamEndCapture_ptsz, true)
