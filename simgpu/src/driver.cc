#include "driver.h"

#include <pthread.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <mutex>
#include <new>

#include "call_counter.h"
#include "fault_guard.h"
#include "stream.h"

namespace chameleon::simgpu {
namespace {

std::atomic<Driver*> g_driver{nullptr};
std::atomic<std::uint64_t> g_host_call_ns{1000};

void ReportAtExit() {
  Driver* d = g_driver.load();
  if (!d) return;
  for (auto& dev : d->devices) {
    std::fprintf(stderr,
                 "simgpu: device %d physical peak %llu bytes (capacity %llu), virtual %llu ns\n",
                 dev->ordinal, static_cast<unsigned long long>(dev->peak.load()),
                 static_cast<unsigned long long>(dev->capacity),
                 static_cast<unsigned long long>(dev->frontier.Now()));
  }
  std::fprintf(stderr, "simgpu: pinned host peak %llu bytes, host virtual %llu ns\n",
               static_cast<unsigned long long>(d->pinned_peak.load()),
               static_cast<unsigned long long>(HostClock().Now()));
}

// fork(): lock order fault handler -> counters -> registry -> contexts -> their streams, as
// everywhere else (workers install the fault handler before taking any other lock).
std::vector<std::shared_ptr<Stream>>* g_fork_streams = nullptr;

void ForkPrepare() {
  Driver* d = g_driver.load();
  LockFaultHandlerForFork();
  detail::LockCountersForFork();
  d->registry.LockForFork();
  g_fork_streams = new std::vector<std::shared_ptr<Stream>>;
  for (auto& dev : d->devices) {
    dev->primary->mu.lock();
    for (auto& s : dev->primary->streams) g_fork_streams->push_back(s);
  }
  for (auto& s : *g_fork_streams) s->LockForFork();
}

void ForkRelease(bool child) {
  Driver* d = g_driver.load();
  for (auto& s : *g_fork_streams) {
    if (child) s->ResetInForkChild();
    s->UnlockAfterFork();
  }
  delete g_fork_streams;
  g_fork_streams = nullptr;
  for (auto& dev : d->devices) dev->primary->mu.unlock();
  if (child) {
    d->registry.ResetLockInForkChild();
  } else {
    d->registry.UnlockAfterFork();
  }
  detail::UnlockCountersAfterFork();
  UnlockFaultHandlerAfterFork();
}

void ForkParent() { ForkRelease(false); }
void ForkChild() { ForkRelease(true); }

Driver* Build(const Config& cfg) {
  auto* d = new Driver;
  d->config = cfg;
  for (int i = 0; i < cfg.device_count; ++i) {
    auto dev = std::make_unique<Device>();
    dev->ordinal = i;
    dev->capacity = cfg.memory_bytes[static_cast<std::size_t>(i)];
    dev->peer_out = std::make_unique<Link[]>(static_cast<std::size_t>(cfg.device_count));
    auto* ctx = new Context;
    ctx->device = dev.get();
    ctx->legacy = std::make_shared<Stream>(ctx, 0u, 0, Stream::Role::kLegacy);
    ctx->streams.push_back(ctx->legacy);
    dev->primary = ctx;
    d->devices.push_back(std::move(dev));
  }
  return d;
}

void RaiseMax(std::atomic<std::uint64_t>& peak, std::uint64_t v) {
  std::uint64_t cur = peak.load(std::memory_order_relaxed);
  while (cur < v && !peak.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

std::uint64_t Link::Schedule(std::uint64_t start, double bytes, double bandwidth,
                             std::uint64_t prune_before) {
  std::lock_guard lock(mu_);
  std::erase_if(busy_, [&](const auto& b) { return b.second <= prune_before; });
  std::uint64_t sharing = 1;
  for (const auto& [s, e] : busy_)
    if (s <= start && start < e) ++sharing;
  const auto d = static_cast<std::uint64_t>(
      std::llround(bytes * static_cast<double>(sharing) / bandwidth * 1e9));
  busy_.emplace_back(start, start + d);
  if (busy_.size() > 4096) busy_.pop_front();  // bound memory if the host clock never advances
  return d;
}

bool Device::Charge(std::uint64_t bytes) {
  std::uint64_t cur = live.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity || cur > capacity - bytes) return false;
  } while (!live.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel));
  RaiseMax(peak, cur + bytes);
  return true;
}

void Device::Uncharge(std::uint64_t bytes) { live.fetch_sub(bytes, std::memory_order_acq_rel); }

void AddPinned(std::uint64_t bytes) {
  Driver* d = TheDriver();
  RaiseMax(d->pinned_peak, d->pinned_live.fetch_add(bytes) + bytes);
}

void SubPinned(std::uint64_t bytes) { TheDriver()->pinned_live.fetch_sub(bytes); }

Driver* TheDriver() { return g_driver.load(std::memory_order_acquire); }

CUresult InitDriver() {
  static std::once_flag once;
  static CUresult result = CUDA_SUCCESS;
  std::call_once(once, [] {
    Config cfg;
    std::string error = LoadConfig(&cfg);
    if (!error.empty()) {
      std::fprintf(stderr, "simgpu: cuInit failed: %s\n", error.c_str());
      result = CUDA_ERROR_INVALID_VALUE;
      return;
    }
    g_host_call_ns.store(cfg.host_call_ns);
    g_driver.store(Build(cfg), std::memory_order_release);
    pthread_atfork(ForkPrepare, ForkParent, ForkChild);
    if (cfg.report) std::atexit(ReportAtExit);
  });
  return result;
}

VirtualClock& HostClock() {
  static auto* clock = new VirtualClock;
  return *clock;
}

std::uint64_t HostCallNs() { return g_host_call_ns.load(std::memory_order_relaxed); }

Context*& CurrentContextSlot() {
  thread_local Context* current = nullptr;
  return current;
}

CUresult CurrentContext(Context** out) {
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  Context* ctx = CurrentContextSlot();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *out = ctx;
  return ctx->Sticky();
}

CUresult GetDevice(CUdevice dev, Device** out) {
  Driver* d = TheDriver();
  if (!d) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= static_cast<int>(d->devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *out = d->devices[static_cast<std::size_t>(dev)].get();
  return CUDA_SUCCESS;
}

CUresult CheckContext(CUcontext h, Context** out) {
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!h) return CurrentContext(out);
  auto* ctx = reinterpret_cast<Context*>(h);
  for (auto& dev : TheDriver()->devices) {
    if (dev->primary == ctx) {
      *out = ctx;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_CONTEXT;
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

namespace chameleon::simgpu {

CUresult CurrentExceptionResult() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

}  // namespace chameleon::simgpu
