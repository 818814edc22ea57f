#include "probe_driver.h"

#include "chameleon/driver_loader/driver_loader.h"

namespace chameleon::probe {

void ProbeDriver::Check(CUresult result, const std::string& what) const {
  driver_loader::Check(cuGetErrorName, result, what);
}

ProbeDriver LoadProbeDriver() {
  const driver_loader::OpenedDriver driver = driver_loader::OpenDriver();
  ProbeDriver api;
  // #name is the unversioned name as written ("cuMemAlloc"): cuGetProcAddress picks the ABI.
#define CHAMELEON_PROBE_RESOLVE(name) \
  driver_loader::Resolve(driver, #name, reinterpret_cast<void**>(&api.name));
  CHAMELEON_PROBE_ENTRY_POINTS(CHAMELEON_PROBE_RESOLVE)
#undef CHAMELEON_PROBE_RESOLVE
  api.Check(api.cuInit(0), "cuInit");
  return api;
}

}  // namespace chameleon::probe
