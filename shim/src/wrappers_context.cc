// Exported context-switch entry points: forwarded untouched, then the calling thread's cached
// current device (tracker.h) is forgotten. No records.
#include "tracker.h"
#include "wrapper_util.h"

using namespace chameleon::shim;

namespace {
using SetCurrentFn = CUresult (*)(CUcontext);
using PopFn = CUresult (*)(CUcontext*);
using CreateV2Fn = CUresult (*)(CUcontext*, unsigned int, CUdevice);
using CreateV3Fn = CUresult (*)(CUcontext*, CUexecAffinityParam*, int, unsigned int, CUdevice);
using CreateV4Fn = CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
}  // namespace

CHAMELEON_WRAPPER(cuCtxSetCurrent, (CUcontext ctx)) {
  Runtime& rt = Enter(kSym_cuCtxSetCurrent);
  CHAMELEON_REAL(rt, cuCtxSetCurrent, SetCurrentFn);
  const CUresult r = real(ctx);
  InvalidateCurrentDevice();
  return r;
}

CHAMELEON_WRAPPER(cuCtxPushCurrent_v2, (CUcontext ctx)) {
  Runtime& rt = Enter(kSym_cuCtxPushCurrent_v2);
  CHAMELEON_REAL(rt, cuCtxPushCurrent_v2, SetCurrentFn);
  const CUresult r = real(ctx);
  InvalidateCurrentDevice();
  return r;
}

CHAMELEON_WRAPPER(cuCtxPopCurrent_v2, (CUcontext * ctx)) {
  Runtime& rt = Enter(kSym_cuCtxPopCurrent_v2);
  CHAMELEON_REAL(rt, cuCtxPopCurrent_v2, PopFn);
  const CUresult r = real(ctx);
  InvalidateCurrentDevice();
  return r;
}

CHAMELEON_WRAPPER(cuCtxCreate_v2, (CUcontext * ctx, unsigned int flags, CUdevice dev)) {
  Runtime& rt = Enter(kSym_cuCtxCreate_v2);
  CHAMELEON_REAL(rt, cuCtxCreate_v2, CreateV2Fn);
  const CUresult r = real(ctx, flags, dev);
  InvalidateCurrentDevice();
  return r;
}

CHAMELEON_WRAPPER(cuCtxCreate_v3, (CUcontext * ctx, CUexecAffinityParam* params, int n,
                                   unsigned int flags, CUdevice dev)) {
  Runtime& rt = Enter(kSym_cuCtxCreate_v3);
  CHAMELEON_REAL(rt, cuCtxCreate_v3, CreateV3Fn);
  const CUresult r = real(ctx, params, n, flags, dev);
  InvalidateCurrentDevice();
  return r;
}

CHAMELEON_WRAPPER(cuCtxCreate_v4,
                  (CUcontext * ctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev)) {
  Runtime& rt = Enter(kSym_cuCtxCreate_v4);
  CHAMELEON_REAL(rt, cuCtxCreate_v4, CreateV4Fn);
  const CUresult r = real(ctx, params, flags, dev);
  InvalidateCurrentDevice();
  return r;
}

CHAMELEON_WRAPPER(cuCtxDestroy_v2, (CUcontext ctx)) {
  Runtime& rt = Enter(kSym_cuCtxDestroy_v2);
  CHAMELEON_REAL(rt, cuCtxDestroy_v2, SetCurrentFn);
  const CUresult r = real(ctx);
  InvalidateCurrentDevice();
  return r;
}
