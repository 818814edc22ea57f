// Streams and events.
#include "api.h"

#include <chrono>

using namespace chameleon::simgpu;

namespace {

CUresult Create(CUstream* ph, unsigned flags, int priority) {
  Context* ctx = nullptr;
  SIMGPU_TRY(CurrentContext(&ctx));
  if (!ph || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)))
    return CUDA_ERROR_INVALID_VALUE;
  *ph = reinterpret_cast<CUstream>(CreateStream(ctx, flags, priority).get());
  return CUDA_SUCCESS;
}

CUresult DestroyStream(CUstream h) {
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  auto* s = reinterpret_cast<Stream*>(h);
  if (!s || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !s->alive() ||
      s->role() != Stream::Role::kUser)
    return CUDA_ERROR_INVALID_HANDLE;
  s->Destroy();  // queued work still runs; the call does not wait
  return CUDA_SUCCESS;
}

// A poll answers as of the host's virtual time, as a real GPU answers as of now: work that ends
// after the host clock is not ready, even when simgpu's worker has already run it (workers run
// ahead of virtual time). Answering "done" there would move the host clock to the work's end,
// turning every non-blocking check into a wait (an executor checking whether swap copies are in
// flight before an unmap would wait for them instead). Such a poll costs a host call, so a
// busy-wait loop ends within one call of the work's end. Work that is due in virtual time is
// done, as on a GPU: if its worker is behind in wall-clock time the poll waits for it (wall time
// only), so that the answer does not depend on how fast this machine runs the workers. Only work
// that stays blocked for kPollWorkerWait (a kernel waiting on the host, in tests) is answered
// not ready, free of virtual time (the number of such polls depends on wall-clock speed).
constexpr std::chrono::milliseconds kPollWorkerWait{250};

CUresult Poll(Stream* s, std::uint64_t seq, std::uint64_t vtime) {
  if (vtime > HostClock().Now()) {
    const std::uint64_t call_ns = HostCallNs();
    HostClock().Advance(call_ns > 0 ? call_ns : 1000);  // a loop must get there
    return CUDA_ERROR_NOT_READY;
  }
  if (!s->Reached(seq) && !s->WaitFor(seq, kPollWorkerWait)) return CUDA_ERROR_NOT_READY;
  detail::HostTick();
  return s->ctx()->Sticky();
}

CUresult Query(CUstream h, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  std::uint64_t vt = 0;
  const std::uint64_t seq = s->Tail(&vt);
  return Poll(s, seq, vt);
}

CUresult Sync(CUstream h, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  s->Synchronize();
  return s->ctx()->Sticky();
}

CUresult WaitEvent(CUstream h, CUevent he, unsigned flags, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  Event* e = AsEvent(he);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> on;
  std::uint64_t seq = 0, vtime = 0;
  {
    std::lock_guard lock(e->mu);
    if (!e->recorded) return CUDA_SUCCESS;  // waiting on a never-recorded event is a no-op
    on = e->stream;
    seq = e->seq;
    vtime = e->vtime;
  }
  s->EnqueueWait(on, seq, vtime);
  return CUDA_SUCCESS;
}

CUresult Record(CUevent he, CUstream h, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  Event* e = AsEvent(he);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  std::uint64_t vt = 0;
  std::uint64_t seq = s->Mark(&vt);
  std::lock_guard lock(e->mu);
  e->stream = s->shared_from_this();
  e->seq = seq;
  e->vtime = vt;
  e->recorded = true;
  return CUDA_SUCCESS;
}

CUresult IsCapturing(CUstream h, CUstreamCaptureStatus* status, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  *status = s->capturing() ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult LaunchHostFunc(CUstream h, CUhostFn fn, void* data, bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  OpSpec op;
  op.work = [fn, data] { fn(data); };
  return s->Submit(std::move(op));
}

CUresult ElapsedTime(float* ms, CUevent hs, CUevent he) {
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Event* a = AsEvent(hs);
  Event* b = AsEvent(he);
  if (!ms || !a || !b) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Stream> sa, sb;
  std::uint64_t qa, qb, ta, tb;
  {
    std::lock_guard lock(a->mu);
    if (!a->recorded || (a->flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_HANDLE;
    sa = a->stream;
    qa = a->seq;
    ta = a->vtime;
  }
  {
    std::lock_guard lock(b->mu);
    if (!b->recorded || (b->flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_HANDLE;
    sb = b->stream;
    qb = b->seq;
    tb = b->vtime;
  }
  if (!sa->Reached(qa) || !sb->Reached(qb)) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((static_cast<double>(tb) - static_cast<double>(ta)) / 1e6);
  return CUDA_SUCCESS;
}

}  // namespace

SIMGPU_API CUresult cuStreamCreate(CUstream* ph, unsigned int flags) try {
  SIMGPU_ENTRY();
  return Create(ph, flags, 0);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) try {
  SIMGPU_ENTRY();
  return Create(ph, flags, priority);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamDestroy(CUstream h) try {
  SIMGPU_ENTRY();
  return DestroyStream(h);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamDestroy_v2(CUstream h) try {
  SIMGPU_ENTRY();
  return DestroyStream(h);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamQuery(CUstream h) try {
  SIMGPU_ENTRY_NO_TICK();
  return Query(h, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamQuery_ptsz(CUstream h) try {
  SIMGPU_ENTRY_NO_TICK();
  return Query(h, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamSynchronize(CUstream h) try {
  SIMGPU_ENTRY();
  return Sync(h, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamSynchronize_ptsz(CUstream h) try {
  SIMGPU_ENTRY();
  return Sync(h, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) try {
  SIMGPU_ENTRY();
  return WaitEvent(h, e, flags, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) try {
  SIMGPU_ENTRY();
  return WaitEvent(h, e, flags, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* status) try {
  SIMGPU_ENTRY();
  return IsCapturing(h, status, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* status) try {
  SIMGPU_ENTRY();
  return IsCapturing(h, status, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* data) try {
  SIMGPU_ENTRY();
  return LaunchHostFunc(h, fn, data, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* data) try {
  SIMGPU_ENTRY();
  return LaunchHostFunc(h, fn, data, true);
}
SIMGPU_CATCH

static CUresult StreamProperty(CUstream h, bool pt, Stream** s) { return ResolveStream(h, pt, s); }

SIMGPU_API CUresult cuStreamGetFlags(CUstream h, unsigned int* flags) try {
  SIMGPU_ENTRY();
  Stream* s = nullptr;
  SIMGPU_TRY(StreamProperty(h, false, &s));
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = s->flags();
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamGetPriority(CUstream h, int* priority) try {
  SIMGPU_ENTRY();
  Stream* s = nullptr;
  SIMGPU_TRY(StreamProperty(h, false, &s));
  if (!priority) return CUDA_ERROR_INVALID_VALUE;
  *priority = s->priority();
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamGetCtx(CUstream h, CUcontext* pctx) try {
  SIMGPU_ENTRY();
  Stream* s = nullptr;
  SIMGPU_TRY(StreamProperty(h, false, &s));
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(s->ctx());
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
SIMGPU_API CUresult cuStreamGetDevice(CUstream h, CUdevice* device) try {
  SIMGPU_ENTRY();
  Stream* s = nullptr;
  SIMGPU_TRY(StreamProperty(h, false, &s));
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = s->ctx()->device->ordinal;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuEventCreate(CUevent* ph, unsigned int flags) try {
  SIMGPU_ENTRY();
  Context* ctx = nullptr;
  SIMGPU_TRY(CurrentContext(&ctx));
  if (!ph) return CUDA_ERROR_INVALID_VALUE;
  *ph = reinterpret_cast<CUevent>(NewEvent(ctx, flags));
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
static CUresult DestroyEvent(CUevent h) {
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Event* e = AsEvent(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  DeleteEvent(e);
  return CUDA_SUCCESS;
}
SIMGPU_API CUresult cuEventDestroy(CUevent h) try {
  SIMGPU_ENTRY();
  return DestroyEvent(h);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventDestroy_v2(CUevent h) try {
  SIMGPU_ENTRY();
  return DestroyEvent(h);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventRecord(CUevent e, CUstream h) try {
  SIMGPU_ENTRY();
  return Record(e, h, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventRecord_ptsz(CUevent e, CUstream h) try {
  SIMGPU_ENTRY();
  return Record(e, h, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int) try {
  SIMGPU_ENTRY();
  return Record(e, h, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream h, unsigned int) try {
  SIMGPU_ENTRY();
  return Record(e, h, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventQuery(CUevent h) try {
  SIMGPU_ENTRY_NO_TICK();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Event* e = AsEvent(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Stream> s;
  std::uint64_t seq = 0, vt = 0;
  {
    std::lock_guard lock(e->mu);
    if (!e->recorded) {
      detail::HostTick();
      return CUDA_SUCCESS;
    }
    s = e->stream;
    seq = e->seq;
    vt = e->vtime;
  }
  return Poll(s.get(), seq, vt);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventSynchronize(CUevent h) try {
  SIMGPU_ENTRY();
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Event* e = AsEvent(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Stream> s;
  std::uint64_t seq = 0, vt = 0;
  {
    std::lock_guard lock(e->mu);
    if (!e->recorded) return CUDA_SUCCESS;
    s = e->stream;
    seq = e->seq;
    vt = e->vtime;
  }
  s->WaitFor(seq);
  HostClock().RaiseTo(vt);
  return s->ctx()->Sticky();
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) try {
  SIMGPU_ENTRY();
  return ElapsedTime(ms, start, end);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) try {
  SIMGPU_ENTRY();
  return ElapsedTime(ms, start, end);
}
SIMGPU_CATCH
