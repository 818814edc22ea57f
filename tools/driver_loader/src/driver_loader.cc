#include "chameleon/driver_loader/driver_loader.h"

#include <dlfcn.h>

namespace chameleon::driver_loader {
namespace {

// The toolkit version the tools claim: cuGetProcAddress hands out the entry point whose ABI
// matches it (cuMemAlloc -> cuMemAlloc_v2, ...).
constexpr int kCudaVersion = 13000;

}  // namespace

OpenedDriver OpenDriver() {
  // RTLD_LOCAL: the driver is reached only through resolved tables, never by symbol binding.
  OpenedDriver driver;
  driver.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver.handle == nullptr) {
    const char* why = dlerror();
    throw DriverError(CUDA_ERROR_NOT_FOUND,
                      std::string("cannot load libcuda.so.1 (set LD_LIBRARY_PATH to the simgpu "
                                  "build directory?): ") +
                          (why != nullptr ? why : "unknown dlopen error"));
  }
  driver.get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(driver.handle, "cuGetProcAddress_v2"));
  if (driver.get_proc == nullptr) {
    throw DriverError(CUDA_ERROR_NOT_FOUND, "libcuda.so.1 does not export cuGetProcAddress_v2");
  }
  return driver;
}

void Resolve(const OpenedDriver& driver, const char* name, void** out) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult result =
      driver.get_proc(name, out, kCudaVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (result != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || *out == nullptr) {
    throw DriverError(result == CUDA_SUCCESS ? CUDA_ERROR_NOT_FOUND : result,
                      std::string("driver entry point ") + name + " not available (CUresult " +
                          std::to_string(result) + ", status " + std::to_string(status) + ")");
  }
}

void Check(decltype(&::cuGetErrorName) get_error_name, CUresult result, const std::string& what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (get_error_name == nullptr || get_error_name(result, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "unknown CUresult";
  }
  const std::string message = what + " failed: " + name + " (" + std::to_string(result) + ")";
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemory(result, message);
  throw DriverError(result, message);
}

}  // namespace chameleon::driver_loader
