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

#define CHAMELEON_LAUNCH_KERNEL(NAME, PER_THREAD)                                           \
  CHAMELEON_WRAPPER(                                                                        \
      NAME, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, \
             unsigned bz, unsigned shmem, CUstream s, void** params, void** extra)) {       \
    Runtime& rt = Enter(kSym_##NAME);                                                       \
    CHAMELEON_REAL(rt, NAME, LaunchKernelFn);                                               \
    const CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);            \
    if (r == CUDA_SUCCESS && Tracking(rt)) {                                                \
      OnLaunch(rt, f, EffectiveStream(s, PER_THREAD), params, extra);                       \
    }                                                                                       \
    return r;                                                                               \
  }
CHAMELEON_LAUNCH_KERNEL(cuLaunchKernel, false)
CHAMELEON_LAUNCH_KERNEL(cuLaunchKernel_ptsz, true)

#define CHAMELEON_LAUNCH_EX(NAME, PER_THREAD)                                                    \
  CHAMELEON_WRAPPER(NAME,                                                                        \
                    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra)) { \
    Runtime& rt = Enter(kSym_##NAME);                                                            \
    CHAMELEON_REAL(rt, NAME, LaunchExFn);                                                        \
    const CUresult r = real(config, f, params, extra);                                           \
    if (r == CUDA_SUCCESS && Tracking(rt) && config != nullptr) {                                \
      OnLaunch(rt, f, EffectiveStream(config->hStream, PER_THREAD), params, extra);              \
    }                                                                                            \
    return r;                                                                                    \
  }
CHAMELEON_LAUNCH_EX(cuLaunchKernelEx, false)
CHAMELEON_LAUNCH_EX(cuLaunchKernelEx_ptsz, true)

#define CHAMELEON_LAUNCH_COOP(NAME, PER_THREAD)                                                    \
  CHAMELEON_WRAPPER(NAME, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,       \
                           unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params)) { \
    Runtime& rt = Enter(kSym_##NAME);                                                              \
    CHAMELEON_REAL(rt, NAME, LaunchCoopFn);                                                        \
    const CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, s, params);                          \
    if (r == CUDA_SUCCESS && Tracking(rt)) {                                                       \
      OnLaunch(rt, f, EffectiveStream(s, PER_THREAD), params, nullptr);                            \
    }                                                                                              \
    return r;                                                                                      \
  }
CHAMELEON_LAUNCH_COOP(cuLaunchCooperativeKernel, false)
CHAMELEON_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz, true)

#define CHAMELEON_GRAPH_LAUNCH(NAME, PER_THREAD)             \
  CHAMELEON_WRAPPER(NAME, (CUgraphExec graph, CUstream s)) { \
    Runtime& rt = Enter(kSym_##NAME);                        \
    CHAMELEON_REAL(rt, NAME, GraphLaunchFn);                 \
    const CUresult r = real(graph, s);                       \
    if (r == CUDA_SUCCESS && Tracking(rt)) {                 \
      OnGraphLaunch(rt, EffectiveStream(s, PER_THREAD));     \
    }                                                        \
    return r;                                                \
  }
CHAMELEON_GRAPH_LAUNCH(cuGraphLaunch, false)
CHAMELEON_GRAPH_LAUNCH(cuGraphLaunch_ptsz, true)
