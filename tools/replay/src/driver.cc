#include "driver.h"

namespace chameleon::replay {

DriverApi LoadDriver() {
  const driver_loader::OpenedDriver driver = driver_loader::OpenDriver();
  DriverApi api;
#define REPLAY_RESOLVE(name) \
  driver_loader::Resolve(driver, #name, reinterpret_cast<void**>(&api.name));
  REPLAY_DRIVER_ENTRY_POINTS(REPLAY_RESOLVE)
#undef REPLAY_RESOLVE
  return api;
}

void Check(const DriverApi& api, CUresult result, const std::string& what) {
  driver_loader::Check(api.cuGetErrorName, result, what);
}

}  // namespace chameleon::replay
