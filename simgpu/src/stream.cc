#include "stream.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <utility>

#include "fault_guard.h"
#include "timeline.h"

namespace chameleon::simgpu {
namespace {

// Streams are never freed: a stale CUstream then reads a cleared magic instead of freed memory.
std::mutex g_graveyard_mu;
std::vector<std::shared_ptr<Stream>>* g_graveyard = new std::vector<std::shared_ptr<Stream>>;

void CallWork(void* arg) { (*static_cast<std::function<void()>*>(arg))(); }

Stream* PerThreadStream(Context* ctx) {
  thread_local std::vector<std::pair<Context*, std::shared_ptr<Stream>>> streams;
  for (auto& [c, s] : streams)
    if (c == ctx) return s.get();
  auto s = std::make_shared<Stream>(ctx, 0u, 0, Stream::Role::kPerThread);
  {
    std::lock_guard lock(ctx->mu);
    ctx->streams.push_back(s);
  }
  streams.emplace_back(ctx, s);
  return s.get();
}

}  // namespace

Stream::Stream(Context* ctx, unsigned flags, int priority, Role role)
    : ctx_(ctx), flags_(flags), priority_(priority), role_(role) {}

void Stream::SyncWithLegacy() {
  // The legacy default stream waits for all blocking streams and they wait for it (CUDA's
  // "legacy default stream" semantics); non-blocking streams opt out.
  if (!blocking()) return;
  std::vector<std::shared_ptr<Stream>> deps;
  {
    std::lock_guard lock(ctx_->mu);
    if (role_ == Role::kLegacy) {
      for (auto& s : ctx_->streams)
        if (s.get() != this && s->blocking()) deps.push_back(s);
    } else if (ctx_->legacy) {
      deps.push_back(ctx_->legacy);
    }
  }
  for (auto& s : deps) {
    std::uint64_t vt = 0;
    std::uint64_t seq = s->Tail(&vt);
    if (seq > 0) EnqueueWait(s, seq, vt);
  }
}

CUresult Stream::Submit(OpSpec op) {
  {
    std::lock_guard lock(mu_);
    if (capture_) {
      capture_->ops.push_back(std::move(op));
      return CUDA_SUCCESS;
    }
  }
  SyncWithLegacy();
  const Config& cfg = TheDriver()->config;
  std::lock_guard lock(mu_);
  const std::uint64_t now = HostClock().Now();
  const std::uint64_t start = std::max(vclock_, now);
  std::uint64_t duration = 0;
  switch (op.cost.kind) {
    case OpCost::Kind::kKernel:
      duration =
          cfg.launch_latency_ns + static_cast<std::uint64_t>(std::llround(op.cost.compute_ns));
      break;
    case OpCost::Kind::kCopy:
      duration = cfg.copy_latency_ns;
      if (op.cost.bandwidth > 0) {
        if (op.cost.link && op.cost.link2) {
          duration += Link::ScheduleOnTwo(*op.cost.link, op.cost.bandwidth, *op.cost.link2,
                                          op.cost.bandwidth2, start, op.cost.bytes, now);
        } else {
          duration += op.cost.link
                          ? op.cost.link->Schedule(start, op.cost.bytes, op.cost.bandwidth, now)
                          : static_cast<std::uint64_t>(
                                std::llround(op.cost.bytes / op.cost.bandwidth * 1e9));
        }
      }
      break;
    case OpCost::Kind::kNone:
      break;
  }
  vclock_ = start + duration;
  ctx_->device->frontier.RaiseTo(vclock_);
  if (TimelineEnabled() && op.cost.kind != OpCost::Kind::kNone) {
    TimelineRecord(
        ctx_->device->ordinal, this,
        op.cost.kind == OpCost::Kind::kCopy ? TimelineKind::kCopy : TimelineKind::kKernel, start,
        vclock_, op.cost.bytes);
  }
  PushLocked(Queued{std::move(op.work), nullptr, 0, op.fail});
  return CUDA_SUCCESS;
}

void Stream::EnqueueWait(const std::shared_ptr<Stream>& other, std::uint64_t seq,
                         std::uint64_t vtime) {
  const bool done = other.get() == this || other->Reached(seq);
  std::lock_guard lock(mu_);
  if (vtime > vclock_ && TimelineEnabled()) {
    TimelineRecord(ctx_->device->ordinal, this, TimelineKind::kWait, vclock_, vtime, 0);
  }
  vclock_ = std::max(vclock_, vtime);
  if (!done) PushLocked(Queued{{}, other, seq, CUDA_SUCCESS});
}

std::uint64_t Stream::Tail(std::uint64_t* vclock) {
  std::lock_guard lock(mu_);
  if (vclock) *vclock = vclock_;
  return submitted_;
}

std::uint64_t Stream::Mark(std::uint64_t* vclock) {
  std::lock_guard lock(mu_);
  vclock_ = std::max(vclock_, HostClock().Now());
  *vclock = vclock_;
  return submitted_;
}

bool Stream::Reached(std::uint64_t seq) {
  std::lock_guard lock(mu_);
  return completed_ >= seq;
}

void Stream::WaitFor(std::uint64_t seq) {
  std::unique_lock lock(mu_);
  ++waiters_;
  done_cv_.wait(lock, [&] { return completed_ >= seq; });
  --waiters_;
}

bool Stream::WaitFor(std::uint64_t seq, std::chrono::milliseconds limit) {
  std::unique_lock lock(mu_);
  ++waiters_;
  const bool reached = done_cv_.wait_for(lock, limit, [&] { return completed_ >= seq; });
  --waiters_;
  return reached;
}

void Stream::Synchronize() {
  std::uint64_t vt = 0;
  std::uint64_t seq = Tail(&vt);
  WaitFor(seq);
  HostClock().RaiseTo(vt);
}

void Stream::Destroy() {
  {
    std::lock_guard lock(ctx_->mu);
    auto& v = ctx_->streams;
    v.erase(std::remove_if(v.begin(), v.end(), [&](auto& s) { return s.get() == this; }), v.end());
  }
  std::lock_guard lock(mu_);
  destroyed_ = true;
  magic_ = 0;
  work_cv_.notify_all();
}

void Stream::PushLocked(Queued q) {
  queue_.push_back(std::move(q));
  ++submitted_;
  if (!worker_started_) {
    worker_started_ = true;
    std::thread([self = shared_from_this()] { self->WorkerLoop(); }).detach();
  } else if (worker_idle_) {
    work_cv_.notify_one();
  }
}

void Stream::WorkerLoop() {
  InstallFaultHandler();
  std::unique_lock lock(mu_);
  for (;;) {
    while (queue_.empty() && !destroyed_) {
      worker_idle_ = true;
      work_cv_.wait(lock);
      worker_idle_ = false;
    }
    if (queue_.empty()) return;  // destroyed and drained
    Queued& q = queue_.front();  // deque::push_back keeps references to other elements valid
    lock.unlock();
    RunOne(q);
    lock.lock();
    queue_.pop_front();
    ++completed_;
    if (waiters_ > 0) done_cv_.notify_all();
  }
}

void Stream::RunOne(Queued& q) {
  if (q.wait_on) {
    q.wait_on->WaitFor(q.wait_seq);
    return;
  }
  if (q.fail != CUDA_SUCCESS) {
    ctx_->SetSticky(q.fail);
    return;
  }
  // A context that has faulted runs nothing more, as on a GPU; the work still "completes" so that
  // host waits return (with the sticky error).
  if (ctx_->Sticky() != CUDA_SUCCESS || !q.work) return;
  switch (RunGuarded(&CallWork, &q.work)) {
    case GuardResult::kOk:
      break;
    case GuardResult::kFault:
      ctx_->SetSticky(CUDA_ERROR_ILLEGAL_ADDRESS);
      break;
    case GuardResult::kException:
      ctx_->SetSticky(CUDA_ERROR_LAUNCH_FAILED);
      break;
  }
}

void Stream::ResetInForkChild() {
  // The parent's workers may have been blocked on these condition variables; in the child those
  // waiters do not exist, but glibc's condvar still counts them and a later notify could wait for
  // them forever. Start from fresh objects (not destroyed: destroying also waits for waiters).
  new (&work_cv_) std::condition_variable;
  new (&done_cv_) std::condition_variable;
  queue_.clear();
  completed_ = submitted_;
  worker_started_ = false;
  worker_idle_ = false;
  waiters_ = 0;
}

bool Stream::BeginCapture() {
  std::lock_guard lock(mu_);
  if (capture_ || role_ == Role::kLegacy) return false;
  capture_ = new Graph;
  return true;
}

Graph* Stream::EndCapture() {
  std::lock_guard lock(mu_);
  return std::exchange(capture_, nullptr);
}

bool Stream::capturing() {
  std::lock_guard lock(mu_);
  return capture_ != nullptr;
}

CUresult ResolveStream(CUstream h, bool per_thread, Stream** out) {
  Context* ctx = nullptr;
  CUresult r = CurrentContext(&ctx);
  if (h == nullptr) h = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    if (r != CUDA_SUCCESS) return r;
    *out = h == CU_STREAM_LEGACY ? ctx->legacy.get() : PerThreadStream(ctx);
    return CUDA_SUCCESS;
  }
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  auto* s = reinterpret_cast<Stream*>(h);
  if (!s->alive()) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult sticky = s->ctx()->Sticky(); sticky != CUDA_SUCCESS) return sticky;
  *out = s;
  return CUDA_SUCCESS;
}

std::shared_ptr<Stream> CreateStream(Context* ctx, unsigned flags, int priority) {
  auto s = std::make_shared<Stream>(ctx, flags, priority, Stream::Role::kUser);
  {
    std::lock_guard lock(ctx->mu);
    ctx->streams.push_back(s);
  }
  std::lock_guard lock(g_graveyard_mu);
  g_graveyard->push_back(s);
  return s;
}

namespace {
std::mutex g_event_mu;
std::vector<Event*>* g_free_events = new std::vector<Event*>;
std::vector<Event*>* g_all_events = new std::vector<Event*>;  // keeps recycled events reachable
}  // namespace

Event* NewEvent(Context* ctx, unsigned flags) {
  Event* e = nullptr;
  {
    std::lock_guard lock(g_event_mu);
    if (!g_free_events->empty()) {
      e = g_free_events->back();
      g_free_events->pop_back();
    }
  }
  if (!e) {
    e = new Event;
    std::lock_guard lock(g_event_mu);
    g_all_events->push_back(e);
  }
  std::lock_guard lock(e->mu);
  e->magic = kEventMagic;
  e->flags = flags;
  e->ctx = ctx;
  e->stream.reset();
  e->seq = 0;
  e->vtime = 0;
  e->recorded = false;
  return e;
}

void DeleteEvent(Event* e) {
  {
    std::lock_guard lock(e->mu);
    e->magic = 0;
    e->stream.reset();
  }
  std::lock_guard lock(g_event_mu);
  g_free_events->push_back(e);
}

Event* AsEvent(CUevent h) {
  auto* e = reinterpret_cast<Event*>(h);
  if (!e || e->magic != kEventMagic) return nullptr;
  return e;
}

CUresult SynchronizeContext(Context* ctx) {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard lock(ctx->mu);
    streams = ctx->streams;
  }
  for (auto& s : streams) s->Synchronize();
  return ctx->Sticky();
}

void SynchronizeAll() {
  Driver* d = TheDriver();
  if (!d) return;
  for (auto& dev : d->devices) SynchronizeContext(dev->primary);
}

}  // namespace chameleon::simgpu
