#include "driver.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <new>

namespace chameleon::simgpu {
namespace {

std::atomic<Driver*> g_driver{nullptr};
std::atomic<std::uint64_t> g_host_call_ns{1000};
std::atomic<std::uint32_t> g_charge_epoch{0};

void RaiseMax(std::atomic<std::uint64_t>& peak, std::uint64_t v) {
  std::uint64_t cur = peak.load(std::memory_order_relaxed);
  while (cur < v && !peak.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

std::uint64_t Link::SharersLocked(std::uint64_t start, std::uint64_t prune_before) {
  std::erase_if(busy_, [&](const auto& b) { return b.second <= prune_before; });
  std::uint64_t sharing = 1;
  for (const auto& [s, e] : busy_)
    if (s <= start && start < e) ++sharing;
  return sharing;
}

void Link::RecordLocked(std::uint64_t start, std::uint64_t duration) {
  busy_.emplace_back(start, start + duration);
  if (busy_.size() > 4096) busy_.pop_front();  // bound memory if the host clock never advances
}

std::uint64_t Link::Schedule(std::uint64_t start, double bytes, double bandwidth,
                             std::uint64_t prune_before) {
  std::lock_guard lock(mu_);
  const auto sharing = static_cast<double>(SharersLocked(start, prune_before));
  const auto d = static_cast<std::uint64_t>(std::llround(bytes * sharing / bandwidth * 1e9));
  RecordLocked(start, d);
  return d;
}

std::uint64_t Link::ScheduleOnTwo(Link& a, double bandwidth_a, Link& b, double bandwidth_b,
                                  std::uint64_t start, double bytes, std::uint64_t prune_before) {
  std::scoped_lock lock(a.mu_, b.mu_);
  const double share_a = bandwidth_a / static_cast<double>(a.SharersLocked(start, prune_before));
  const double share_b = bandwidth_b / static_cast<double>(b.SharersLocked(start, prune_before));
  const auto d = static_cast<std::uint64_t>(std::llround(bytes / std::min(share_a, share_b) * 1e9));
  a.RecordLocked(start, d);
  b.RecordLocked(start, d);
  return d;
}

bool Device::Charge(std::uint64_t bytes) {
  if (ledger) {
    // A full node device may hold a killed process's bytes: return them and try once more.
    if (!ledger->Charge(node_index, bytes) &&
        (ledger->ReclaimStale() == 0 || !ledger->Charge(node_index, bytes)))
      return false;
    RaiseMax(peak, live.fetch_add(bytes, std::memory_order_acq_rel) + bytes);
    return true;
  }
  std::uint64_t cur = live.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity || cur > capacity - bytes) return false;
  } while (!live.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel));
  RaiseMax(peak, cur + bytes);
  return true;
}

void Device::Uncharge(std::uint64_t bytes, std::uint32_t epoch) {
  live.fetch_sub(bytes, std::memory_order_acq_rel);
  if (ledger && epoch == ChargeEpoch()) ledger->Release(node_index, bytes);
}

std::uint32_t ChargeEpoch() { return g_charge_epoch.load(std::memory_order_relaxed); }
void BeginChargeEpochInForkChild() { g_charge_epoch.fetch_add(1, std::memory_order_relaxed); }

std::uint64_t Device::InUse() const {
  return ledger ? ledger->Used(node_index) : live.load(std::memory_order_acquire);
}

Link* NumaLink(int from, int to) {
  Driver* d = TheDriver();
  if (from == to || from < 0 || to < 0 || from >= d->numa_count || to >= d->numa_count)
    return nullptr;
  return &d->numa_links[static_cast<std::size_t>(from) * static_cast<std::size_t>(d->numa_count) +
                        static_cast<std::size_t>(to)];
}

void AddPinned(std::uint64_t bytes) {
  Driver* d = TheDriver();
  RaiseMax(d->pinned_peak, d->pinned_live.fetch_add(bytes) + bytes);
}

void SubPinned(std::uint64_t bytes) { TheDriver()->pinned_live.fetch_sub(bytes); }

Driver* TheDriver() { return g_driver.load(std::memory_order_acquire); }

void InstallDriver(Driver* driver, std::uint64_t host_call_ns) {
  g_host_call_ns.store(host_call_ns);
  g_driver.store(driver, std::memory_order_release);
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
