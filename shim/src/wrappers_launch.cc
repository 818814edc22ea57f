// Exported launch entry points (legacy and per-thread-default-stream flavours).
#include "wrapper_util.h"

namespace chameleon::shim {
namespace {

using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**);
using LaunchExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using LaunchCoopFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, CUstream, void**);
using GraphLaunchFn = CUresult (*)(CUgraphExec, CUstream);

}  // namespace
}  // namespace chameleon::shim

using namespace chameleon::shim;

#define CHAMELEON_LAUNCH_KERNEL(NAME, PER_THREAD)                                              \
  CHAMELEON_WRAPPER(                                                                           \
      NAME, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,    \
             unsigned bz, unsigned shmem, CUstream s, void** params, void** extra)) {          \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                   \
    CHAMELEON_REAL(rt, NAME, LaunchKernelFn);                                                  \
    if (!Tracking(rt)) return real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);        \
    LaunchOp op;                                                                               \
    const CUresult e = BeginLaunch(rt, f, EffectiveStream(s, PER_THREAD), params, extra, &op); \
    if (e != CUDA_SUCCESS) return e;                                                           \
    const CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);               \
    if (r == CUDA_SUCCESS) EndLaunch(rt, &op);                                                 \
    return r;                                                                                  \
  }
CHAMELEON_LAUNCH_KERNEL(cuLaunchKernel, false)
CHAMELEON_LAUNCH_KERNEL(cuLaunchKernel_ptsz, true)

#define CHAMELEON_LAUNCH_EX(NAME, PER_THREAD)                                                    \
  CHAMELEON_WRAPPER(NAME,                                                                        \
                    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra)) { \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                     \
    CHAMELEON_REAL(rt, NAME, LaunchExFn);                                                        \
    if (!Tracking(rt) || config == nullptr) return real(config, f, params, extra);               \
    LaunchOp op;                                                                                 \
    const CUresult e =                                                                           \
        BeginLaunch(rt, f, EffectiveStream(config->hStream, PER_THREAD), params, extra, &op);    \
    if (e != CUDA_SUCCESS) return e;                                                             \
    const CUresult r = real(config, f, params, extra);                                           \
    if (r == CUDA_SUCCESS) EndLaunch(rt, &op);                                                   \
    return r;                                                                                    \
  }
CHAMELEON_LAUNCH_EX(cuLaunchKernelEx, false)
CHAMELEON_LAUNCH_EX(cuLaunchKernelEx_ptsz, true)

#define CHAMELEON_LAUNCH_COOP(NAME, PER_THREAD)                                                    \
  CHAMELEON_WRAPPER(NAME, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,       \
                           unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params)) { \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                       \
    CHAMELEON_REAL(rt, NAME, LaunchCoopFn);                                                        \
    if (!Tracking(rt)) return real(f, gx, gy, gz, bx, by, bz, shmem, s, params);                   \
    LaunchOp op;                                                                                   \
    const CUresult e = BeginLaunch(rt, f, EffectiveStream(s, PER_THREAD), params, nullptr, &op);   \
    if (e != CUDA_SUCCESS) return e;                                                               \
    const CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, s, params);                          \
    if (r == CUDA_SUCCESS) EndLaunch(rt, &op);                                                     \
    return r;                                                                                      \
  }
CHAMELEON_LAUNCH_COOP(cuLaunchCooperativeKernel, false)
CHAMELEON_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz, true)

#define CHAMELEON_GRAPH_LAUNCH(NAME, PER_THREAD)                                  \
  CHAMELEON_WRAPPER(NAME, (CUgraphExec graph, CUstream s)) {                      \
    Runtime& rt = EnterTracked(kSym_##NAME);                                      \
    CHAMELEON_REAL(rt, NAME, GraphLaunchFn);                                      \
    if (!Tracking(rt)) return real(graph, s);                                     \
    PendingOp op;                                                                 \
    const CUresult e = BeginGraphLaunch(rt, EffectiveStream(s, PER_THREAD), &op); \
    if (e != CUDA_SUCCESS) return e;                                              \
    const CUresult r = real(graph, s);                                            \
    if (r == CUDA_SUCCESS) EndGraphLaunch(rt, &op);                               \
    return r;                                                                     \
  }
CHAMELEON_GRAPH_LAUNCH(cuGraphLaunch, false)
CHAMELEON_GRAPH_LAUNCH(cuGraphLaunch_ptsz, true)
