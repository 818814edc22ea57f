// simgpu-only entry points (chameleon/simgpu/control.h). They count their calls but do not charge
// the host clock: observing the simulation must not change it.
#include "chameleon/simgpu/control.h"

#include <algorithm>
#include <mutex>

#include "call_counter.h"
#include "driver.h"
#include "stream.h"

using namespace chameleon::simgpu;

#define SIMGPU_COUNT_ONLY()                                        \
  static std::atomic<std::uint64_t>* const simgpu_entry_counter_ = \
      ::chameleon::simgpu::detail::RegisterCounter(__func__);      \
  simgpu_entry_counter_->fetch_add(1, std::memory_order_relaxed)

extern "C" __attribute__((visibility("default"))) int simgpuGetPhysicalUsage(int device,
                                                                             std::uint64_t* live,
                                                                             std::uint64_t* peak) {
  SIMGPU_COUNT_ONLY();
  Device* dev = nullptr;
  if (CUresult r = GetDevice(device, &dev); r != CUDA_SUCCESS) return r;
  if (live) *live = dev->live.load();
  if (peak) *peak = dev->peak.load();
  return CUDA_SUCCESS;
}

extern "C" __attribute__((visibility("default"))) std::uint64_t simgpuGetCallCount(
    const char* name) {
  SIMGPU_COUNT_ONLY();
  return name ? detail::CallCount(name) : 0;
}

extern "C" __attribute__((visibility("default"))) std::uint64_t simgpuHostVirtualNs(void) {
  SIMGPU_COUNT_ONLY();
  return HostClock().Now();
}

extern "C" __attribute__((visibility("default"))) std::uint64_t simgpuDeviceVirtualNs(int device) {
  SIMGPU_COUNT_ONLY();
  Device* dev = nullptr;
  if (GetDevice(device, &dev) != CUDA_SUCCESS) return 0;
  return dev->frontier.Now();
}

extern "C" __attribute__((visibility("default"))) int simgpuEventVirtualNs(void* event,
                                                                           std::uint64_t* ns) {
  SIMGPU_COUNT_ONLY();
  Event* e = AsEvent(static_cast<CUevent>(event));
  if (e == nullptr || ns == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(e->mu);
  if (!e->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ns = e->vtime;
  return CUDA_SUCCESS;
}

extern "C" __attribute__((visibility("default"))) int simgpuStreamVirtualNs(void* stream,
                                                                            std::uint64_t* ns) {
  SIMGPU_COUNT_ONLY();
  if (ns == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(static_cast<CUstream>(stream), false, &s); r != CUDA_SUCCESS) {
    return r;
  }
  std::uint64_t clock = 0;
  s->Tail(&clock);
  *ns = std::max(clock, HostClock().Now());
  return CUDA_SUCCESS;
}
