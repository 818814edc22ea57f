#include "driver.h"

#include <dlfcn.h>

namespace chameleon::train_sim {

DriverApi LoadDriver() {
  const driver_loader::OpenedDriver driver = driver_loader::OpenDriver();
  DriverApi api;
#define TRAIN_SIM_RESOLVE(name) \
  driver_loader::Resolve(driver, #name, reinterpret_cast<void**>(&api.name));
  TRAIN_SIM_DRIVER_ENTRY_POINTS(TRAIN_SIM_RESOLVE)
#undef TRAIN_SIM_RESOLVE
  // Optional and simgpu-only; a real driver simply lacks it.
  api.simgpu_physical_usage = reinterpret_cast<int (*)(int, std::uint64_t*, std::uint64_t*)>(
      dlsym(driver.handle, "simgpuGetPhysicalUsage"));
  return api;
}

void Check(const DriverApi& api, CUresult result, const std::string& what) {
  driver_loader::Check(api.cuGetErrorName, result, what);
}

}  // namespace chameleon::train_sim
