// Minimal graphs: single-stream capture recorded as a list of stream operations, replayed in
// order by cuGraphLaunch (each replay is timed afresh). Enough for CUDA-graph style replay loops.
#include "api.h"

using namespace chameleon::simgpu;

namespace {

struct GraphExec {
  std::uint32_t magic = 0x43584547u;
  std::vector<OpSpec> ops;
};

CUresult BeginCapture(CUstream h, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  if (!s->BeginCapture()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream h, CUgraph* graph, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  Graph* g = s->EndCapture();
  if (!g) return CUDA_ERROR_ILLEGAL_STATE;
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

Graph* AsGraph(CUgraph h) {
  auto* g = reinterpret_cast<Graph*>(h);
  return g && g->magic == 0x48505247u ? g : nullptr;
}

GraphExec* AsExec(CUgraphExec h) {
  auto* e = reinterpret_cast<GraphExec*>(h);
  return e && e->magic == 0x43584547u ? e : nullptr;
}

CUresult Launch(CUgraphExec h, CUstream hs, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(hs, pt, &s));
  GraphExec* e = AsExec(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  for (const OpSpec& op : e->ops) SIMGPU_TRY(s->Submit(op));
  return CUDA_SUCCESS;
}

}  // namespace

SIMGPU_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode) try {
  SIMGPU_ENTRY();
  return BeginCapture(h, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode) try {
  SIMGPU_ENTRY();
  return BeginCapture(h, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamEndCapture(CUstream h, CUgraph* graph) try {
  SIMGPU_ENTRY();
  return EndCapture(h, graph, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph* graph) try {
  SIMGPU_ENTRY();
  return EndCapture(h, graph, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph h,
                                                unsigned long long) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Graph* g = AsGraph(h);
  if (!exec || !g) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new GraphExec;
  e->ops = g->ops;
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
SIMGPU_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) try {
  SIMGPU_ENTRY();
  return Launch(exec, s, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) try {
  SIMGPU_ENTRY();
  return Launch(exec, s, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuGraphDestroy(CUgraph h) try {
  SIMGPU_ENTRY();
  Graph* g = AsGraph(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  g->magic = 0;
  delete g;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
SIMGPU_API CUresult cuGraphExecDestroy(CUgraphExec h) try {
  SIMGPU_ENTRY();
  GraphExec* e = AsExec(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  e->magic = 0;
  delete e;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
