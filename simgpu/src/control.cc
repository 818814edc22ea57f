// simgpu-only entry points (chameleon/simgpu/control.h). They count their calls but do not charge
// the host clock: observing the simulation must not change it.
#include "chameleon/simgpu/control.h"

#include "call_counter.h"
#include "driver.h"

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
