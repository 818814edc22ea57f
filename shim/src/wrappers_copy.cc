// Exported copy and memset entry points (sync _ptds and async _ptsz flavours).
#include "wrapper_util.h"

using namespace chameleon::shim;
namespace ipc = chameleon::ipc;

namespace {
using CopyFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t);
using CopyAsyncFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
using PeerFn = CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
using PeerAsyncFn = CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
using HtoDFn = CUresult (*)(CUdeviceptr, const void*, size_t);
using HtoDAsyncFn = CUresult (*)(CUdeviceptr, const void*, size_t, CUstream);
using DtoHFn = CUresult (*)(void*, CUdeviceptr, size_t);
using DtoHAsyncFn = CUresult (*)(void*, CUdeviceptr, size_t, CUstream);
template <typename T>
using MemsetFn = CUresult (*)(CUdeviceptr, T, size_t);
template <typename T>
using MemsetAsyncFn = CUresult (*)(CUdeviceptr, T, size_t, CUstream);
}  // namespace

// clang-format off
// Generic copies (token 0: the direction is read from the pointers) and device-to-device ones
// (kTokenCopyDtoD) differ only in the token they record.
#define CHAMELEON_COPY_TOKEN(NAME, PT, TOKEN)                                                     \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, CUdeviceptr src, size_t n)) {                         \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, CopyFn);                                                             \
    if (!Tracking(rt)) return real(dst, src, n);                                                  \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, TOKEN, src, dst, n, EffectiveStream(nullptr, PT), false, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, src, n);                                                         \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_COPY_ASYNC_TOKEN(NAME, PT, TOKEN)                                               \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)) {             \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, CopyAsyncFn);                                                        \
    if (!Tracking(rt)) return real(dst, src, n, s);                                               \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, TOKEN, src, dst, n, EffectiveStream(s, PT), false, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, src, n, s);                                                      \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_COPY(NAME, PT) CHAMELEON_COPY_TOKEN(NAME, PT, 0)
#define CHAMELEON_COPY_ASYNC(NAME, PT) CHAMELEON_COPY_ASYNC_TOKEN(NAME, PT, 0)
#define CHAMELEON_PEER(NAME, PT)                                                                  \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n)) { \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, PeerFn);                                                             \
    if (!Tracking(rt)) return real(dst, dc, src, sc, n);                                          \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, 0, src, dst, n, EffectiveStream(nullptr, PT), true, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, dc, src, sc, n);                                                 \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_PEER_ASYNC(NAME, PT)                                                            \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s)) { \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, PeerAsyncFn);                                                        \
    if (!Tracking(rt)) return real(dst, dc, src, sc, n, s);                                       \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, 0, src, dst, n, EffectiveStream(s, PT), true, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, dc, src, sc, n, s);                                              \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_HTOD(NAME, PT)                                                                  \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, const void* src, size_t n)) {                         \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, HtoDFn);                                                             \
    if (!Tracking(rt)) return real(dst, src, n);                                                  \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, ipc::kTokenCopyHtoD, 0, dst, n, EffectiveStream(nullptr, PT), false, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, src, n);                                                         \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_HTOD_ASYNC(NAME, PT)                                                            \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, const void* src, size_t n, CUstream s)) {             \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, HtoDAsyncFn);                                                        \
    if (!Tracking(rt)) return real(dst, src, n, s);                                               \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, ipc::kTokenCopyHtoD, 0, dst, n, EffectiveStream(s, PT), false, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, src, n, s);                                                      \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_DTOH(NAME, PT)                                                                  \
  CHAMELEON_WRAPPER(NAME, (void* dst, CUdeviceptr src, size_t n)) {                               \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, DtoHFn);                                                             \
    if (!Tracking(rt)) return real(dst, src, n);                                                  \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, ipc::kTokenCopyDtoH, src, 0, n, EffectiveStream(nullptr, PT), false, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, src, n);                                                         \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_DTOH_ASYNC(NAME, PT)                                                            \
  CHAMELEON_WRAPPER(NAME, (void* dst, CUdeviceptr src, size_t n, CUstream s)) {                   \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, DtoHAsyncFn);                                                        \
    if (!Tracking(rt)) return real(dst, src, n, s);                                               \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginCopy(rt, ipc::kTokenCopyDtoH, src, 0, n, EffectiveStream(s, PT), false, &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, src, n, s);                                                      \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_DTOD(NAME, PT) CHAMELEON_COPY_TOKEN(NAME, PT, ipc::kTokenCopyDtoD)
#define CHAMELEON_DTOD_ASYNC(NAME, PT) CHAMELEON_COPY_ASYNC_TOKEN(NAME, PT, ipc::kTokenCopyDtoD)
#define CHAMELEON_MEMSET(NAME, T, PT)                                                             \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, T value, size_t n)) {                                 \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, MemsetFn<T>);                                                        \
    if (!Tracking(rt)) return real(dst, value, n);                                                \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginMemset(rt, dst, n * sizeof(T), EffectiveStream(nullptr, PT), &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, value, n);                                                       \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
#define CHAMELEON_MEMSET_ASYNC(NAME, T, PT)                                                       \
  CHAMELEON_WRAPPER(NAME, (CUdeviceptr dst, T value, size_t n, CUstream s)) {                     \
    Runtime& rt = EnterTracked(kSym_##NAME);                                                             \
    CHAMELEON_REAL(rt, NAME, MemsetAsyncFn<T>);                                                   \
    if (!Tracking(rt)) return real(dst, value, n, s);                                             \
    CopyOp op;                                                                                    \
    if (const CUresult e = BeginMemset(rt, dst, n * sizeof(T), EffectiveStream(s, PT), &op); e != CUDA_SUCCESS) return e; \
    const CUresult r = real(dst, value, n, s);                                                    \
    if (r == CUDA_SUCCESS) EndCopy(rt, &op);                                                      \
    return r;                                                                                     \
  }
// clang-format on

CHAMELEON_COPY(cuMemcpy, false)
CHAMELEON_COPY(cuMemcpy_ptds, true)
CHAMELEON_COPY_ASYNC(cuMemcpyAsync, false)
CHAMELEON_COPY_ASYNC(cuMemcpyAsync_ptsz, true)
CHAMELEON_PEER(cuMemcpyPeer, false)
CHAMELEON_PEER(cuMemcpyPeer_ptds, true)
CHAMELEON_PEER_ASYNC(cuMemcpyPeerAsync, false)
CHAMELEON_PEER_ASYNC(cuMemcpyPeerAsync_ptsz, true)
CHAMELEON_HTOD(cuMemcpyHtoD_v2, false)
CHAMELEON_HTOD(cuMemcpyHtoD_v2_ptds, true)
CHAMELEON_DTOH(cuMemcpyDtoH_v2, false)
CHAMELEON_DTOH(cuMemcpyDtoH_v2_ptds, true)
CHAMELEON_DTOD(cuMemcpyDtoD_v2, false)
CHAMELEON_DTOD(cuMemcpyDtoD_v2_ptds, true)
CHAMELEON_HTOD_ASYNC(cuMemcpyHtoDAsync_v2, false)
CHAMELEON_HTOD_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, true)
CHAMELEON_DTOH_ASYNC(cuMemcpyDtoHAsync_v2, false)
CHAMELEON_DTOH_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, true)
CHAMELEON_DTOD_ASYNC(cuMemcpyDtoDAsync_v2, false)
CHAMELEON_DTOD_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, true)
CHAMELEON_MEMSET(cuMemsetD8_v2, unsigned char, false)
CHAMELEON_MEMSET(cuMemsetD8_v2_ptds, unsigned char, true)
CHAMELEON_MEMSET(cuMemsetD16_v2, unsigned short, false)
CHAMELEON_MEMSET(cuMemsetD16_v2_ptds, unsigned short, true)
CHAMELEON_MEMSET(cuMemsetD32_v2, unsigned int, false)
CHAMELEON_MEMSET(cuMemsetD32_v2_ptds, unsigned int, true)
CHAMELEON_MEMSET_ASYNC(cuMemsetD8Async, unsigned char, false)
CHAMELEON_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, true)
CHAMELEON_MEMSET_ASYNC(cuMemsetD16Async, unsigned short, false)
CHAMELEON_MEMSET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, true)
CHAMELEON_MEMSET_ASYNC(cuMemsetD32Async, unsigned int, false)
CHAMELEON_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, true)
