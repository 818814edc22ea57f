#include "vmm_latency.h"

#include <array>
#include <chrono>

namespace chameleon::probe {
namespace {

double MicrosSince(std::chrono::steady_clock::time_point* t) {
  const auto now = std::chrono::steady_clock::now();
  const double us = std::chrono::duration<double, std::micro>(now - *t).count();
  *t = now;
  return us;
}

}  // namespace

std::vector<LatencyFigure> MeasureVmmLatency(const ProbeDriver& driver, int device, int trials,
                                             std::size_t* chunk_bytes) {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  driver.Check(driver.cuDeviceGet(&dev, device), "cuDeviceGet");
  driver.Check(driver.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  driver.Check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  std::size_t size = 0;
  driver.Check(driver.cuMemGetAllocationGranularity(&size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
               "cuMemGetAllocationGranularity");
  *chunk_bytes = size;
  CUdeviceptr va = 0;
  driver.Check(driver.cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve");
  const CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, dev},
                               CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  constexpr std::array<const char*, 5> kCalls{"cuMemCreate", "cuMemMap", "cuMemSetAccess",
                                              "cuMemUnmap", "cuMemRelease"};
  std::array<std::vector<double>, kCalls.size()> samples;
  for (int t = 0; t < trials; ++t) {
    CUmemGenericAllocationHandle h = 0;
    auto clock = std::chrono::steady_clock::now();
    driver.Check(driver.cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
    samples[0].push_back(MicrosSince(&clock));
    driver.Check(driver.cuMemMap(va, size, 0, h, 0), "cuMemMap");
    samples[1].push_back(MicrosSince(&clock));
    driver.Check(driver.cuMemSetAccess(va, size, &access, 1), "cuMemSetAccess");
    samples[2].push_back(MicrosSince(&clock));
    driver.Check(driver.cuMemUnmap(va, size), "cuMemUnmap");
    samples[3].push_back(MicrosSince(&clock));
    driver.Check(driver.cuMemRelease(h), "cuMemRelease");
    samples[4].push_back(MicrosSince(&clock));
  }
  driver.cuMemAddressFree(va, size);
  driver.cuDevicePrimaryCtxRelease(dev);
  std::vector<LatencyFigure> out;
  for (std::size_t i = 0; i < kCalls.size(); ++i) out.push_back({kCalls[i], SpreadOf(samples[i])});
  return out;
}

}  // namespace chameleon::probe
