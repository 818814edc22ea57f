// Primary and current contexts. simgpu has exactly one (primary) context per device.
#include <vector>

#include "api.h"

using namespace chameleon::simgpu;

namespace {

std::vector<Context*>& Below() {
  thread_local std::vector<Context*> stack;
  return stack;
}

CUresult Primary(CUdevice device, Context** out) {
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  *out = dev->primary;
  return CUDA_SUCCESS;
}

CUresult Release(CUdevice device) {
  Context* ctx = nullptr;
  SIMGPU_TRY(Primary(device, &ctx));
  std::lock_guard lock(ctx->mu);
  if (ctx->retain_count <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  --ctx->retain_count;
  return CUDA_SUCCESS;
}

CUresult SetFlags(CUdevice device, unsigned flags) {
  Context* ctx = nullptr;
  SIMGPU_TRY(Primary(device, &ctx));
  std::lock_guard lock(ctx->mu);
  ctx->flags = flags;
  return CUDA_SUCCESS;
}

// Waits for the context's work, then clears its sticky error: the only way out of a fault.
CUresult Reset(CUdevice device) {
  Context* ctx = nullptr;
  SIMGPU_TRY(Primary(device, &ctx));
  SynchronizeContext(ctx);
  ctx->sticky.store(CUDA_SUCCESS, std::memory_order_release);
  std::lock_guard lock(ctx->mu);
  ctx->retain_count = 0;
  ctx->flags = 0;
  return CUDA_SUCCESS;
}

// cudaVersion 13000 resolves "cuCtxSynchronize" to cuCtxSynchronize_v2(CUcontext), but cuda.h
// 13.0 still declares only cuCtxSynchronize(void): a caller using the header's type leaves an
// arbitrary value where the context goes. A handle that is not a context therefore means "the
// current context" here (CheckContext compares handles, it never dereferences them).
CUresult Synchronize(CUcontext h) {
  Context* ctx = nullptr;
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!h || CheckContext(h, &ctx) != CUDA_SUCCESS) {
    ctx = CurrentContextSlot();
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  }
  return SynchronizeContext(ctx);
}

}  // namespace

SIMGPU_API CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice device) try {
  SIMGPU_ENTRY();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  SIMGPU_TRY(Primary(device, &ctx));
  std::lock_guard lock(ctx->mu);
  ++ctx->retain_count;
  *pctx = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDevicePrimaryCtxRelease(CUdevice device) try {
  SIMGPU_ENTRY();
  return Release(device);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) try {
  SIMGPU_ENTRY();
  return Release(device);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags,
                                               int* active) try {
  SIMGPU_ENTRY();
  Context* ctx = nullptr;
  SIMGPU_TRY(Primary(device, &ctx));
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(ctx->mu);
  *flags = ctx->flags;
  *active = ctx->retain_count > 0;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice device, unsigned int flags) try {
  SIMGPU_ENTRY();
  return SetFlags(device, flags);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice device, unsigned int flags) try {
  SIMGPU_ENTRY();
  return SetFlags(device, flags);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDevicePrimaryCtxReset(CUdevice device) try {
  SIMGPU_ENTRY();
  return Reset(device);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) try {
  SIMGPU_ENTRY();
  return Reset(device);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxSetCurrent(CUcontext h) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Context* ctx = nullptr;
  if (h) SIMGPU_TRY(CheckContext(h, &ctx));
  CurrentContextSlot() = ctx;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxGetCurrent(CUcontext* pctx) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(CurrentContextSlot());
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxPushCurrent_v2(CUcontext h) try {
  SIMGPU_ENTRY();
  Context* ctx = nullptr;
  if (!h) return CUDA_ERROR_INVALID_CONTEXT;
  SIMGPU_TRY(CheckContext(h, &ctx));
  Below().push_back(CurrentContextSlot());
  CurrentContextSlot() = ctx;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxPopCurrent_v2(CUcontext* pctx) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Context* cur = CurrentContextSlot();
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = reinterpret_cast<CUcontext>(cur);
  auto& below = Below();
  CurrentContextSlot() = below.empty() ? nullptr : below.back();
  if (!below.empty()) below.pop_back();
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxGetDevice(CUdevice* device) try {
  SIMGPU_ENTRY();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Context* ctx = CurrentContextSlot();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->device->ordinal;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxGetFlags(unsigned int* flags) try {
  SIMGPU_ENTRY();
  Context* ctx = nullptr;
  SIMGPU_TRY(CurrentContext(&ctx));
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(ctx->mu);
  *flags = ctx->flags;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxGetApiVersion(CUcontext h, unsigned int* version) try {
  SIMGPU_ENTRY();
  Context* ctx = nullptr;
  SIMGPU_TRY(CheckContext(h, &ctx));
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = 3020;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxSynchronize(void) try {
  SIMGPU_ENTRY();
  return Synchronize(nullptr);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxSynchronize_v2(CUcontext ctx) try {
  SIMGPU_ENTRY();
  return Synchronize(ctx);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) try {
  SIMGPU_ENTRY();
  Context* cur = nullptr;
  Context* other = nullptr;
  SIMGPU_TRY(CurrentContext(&cur));
  if (!peer) return CUDA_ERROR_INVALID_HANDLE;
  SIMGPU_TRY(CheckContext(peer, &other));
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (other == cur) return CUDA_ERROR_INVALID_DEVICE;
  const auto& bw = TheDriver()->config.peer_bandwidth;
  if (bw[static_cast<std::size_t>(cur->device->ordinal)]
        [static_cast<std::size_t>(other->device->ordinal)] <= 0)
    return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuCtxDisablePeerAccess(CUcontext peer) try {
  SIMGPU_ENTRY();
  Context* other = nullptr;
  if (!peer) return CUDA_ERROR_INVALID_HANDLE;
  SIMGPU_TRY(CheckContext(peer, &other));
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

// CUDA 13: the device of an explicit context (null = current). Lenient about a non-context
// handle for the same reason as cuCtxSynchronize_v2: cuda.h declares only the one-argument form.
SIMGPU_API CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext h) try {
  SIMGPU_ENTRY();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Context* ctx = nullptr;
  if (!h || CheckContext(h, &ctx) != CUDA_SUCCESS) ctx = CurrentContextSlot();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->device->ordinal;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
