#include "driver.h"

#include <dlfcn.h>

namespace chameleon::replay {
namespace {

// The toolkit version the replayer claims: cuGetProcAddress hands out the matching ABI.
constexpr int kCudaVersion = 13000;

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

void Resolve(GetProcAddressFn get_proc, const char* name, void** out) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult r = get_proc(name, out, kCudaVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || *out == nullptr) {
    throw DriverError(r == CUDA_SUCCESS ? CUDA_ERROR_NOT_FOUND : r,
                      std::string("driver entry point ") + name + " not available");
  }
}

}  // namespace

DriverApi LoadDriver() {
  // RTLD_LOCAL: the driver is reached only through the table, never by symbol binding.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw DriverError(
        CUDA_ERROR_NOT_FOUND,
        std::string(
            "cannot load libcuda.so.1 (set LD_LIBRARY_PATH to the simgpu build directory?): ") +
            (why != nullptr ? why : "unknown dlopen error"));
  }
  auto get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(handle, "cuGetProcAddress_v2"));
  if (get_proc == nullptr)
    throw DriverError(CUDA_ERROR_NOT_FOUND, "libcuda.so.1 lacks cuGetProcAddress_v2");
  DriverApi api;
#define REPLAY_RESOLVE(name) Resolve(get_proc, #name, reinterpret_cast<void**>(&api.name));
  REPLAY_DRIVER_ENTRY_POINTS(REPLAY_RESOLVE)
#undef REPLAY_RESOLVE
  return api;  // the handle stays open for the life of the process, as cudart's does
}

void Check(const DriverApi& api, CUresult result, const std::string& what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "unknown CUresult";
  }
  const std::string message = what + " failed: " + name + " (" + std::to_string(result) + ")";
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemory(result, message);
  throw DriverError(result, message);
}

}  // namespace chameleon::replay
