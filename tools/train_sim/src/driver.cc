#include "driver.h"

#include <dlfcn.h>

namespace chameleon::train_sim {
namespace {

// The toolkit version the trainer claims to be built against: cuGetProcAddress returns the
// entry point whose ABI matches this version (cuMemAlloc -> cuMemAlloc_v2, ...).
constexpr int kCudaVersion = 13000;

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

void* OpenLibcuda() {
  // RTLD_LOCAL: the trainer reaches the driver only through the table, never by symbol binding.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw DriverError(CUDA_ERROR_NOT_FOUND,
                      std::string("cannot load libcuda.so.1 (set LD_LIBRARY_PATH to the simgpu "
                                  "build directory?): ") +
                          (why != nullptr ? why : "unknown dlopen error"));
  }
  return handle;
}

void Resolve(GetProcAddressFn get_proc, const char* name, void** out) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult result = get_proc(name, out, kCudaVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (result != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || *out == nullptr) {
    throw DriverError(result == CUDA_SUCCESS ? CUDA_ERROR_NOT_FOUND : result,
                      std::string("driver entry point ") + name + " not available (CUresult " +
                          std::to_string(result) + ", status " + std::to_string(status) + ")");
  }
}

}  // namespace

DriverApi LoadDriver() {
  void* handle = OpenLibcuda();
  auto get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(handle, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    throw DriverError(CUDA_ERROR_NOT_FOUND, "libcuda.so.1 does not export cuGetProcAddress_v2");
  }
  DriverApi api;
#define TRAIN_SIM_RESOLVE(name) Resolve(get_proc, #name, reinterpret_cast<void**>(&api.name));
  TRAIN_SIM_DRIVER_ENTRY_POINTS(TRAIN_SIM_RESOLVE)
#undef TRAIN_SIM_RESOLVE
  // Optional and simgpu-only; a real driver simply lacks it.
  api.simgpu_physical_usage = reinterpret_cast<int (*)(int, std::uint64_t*, std::uint64_t*)>(
      dlsym(handle, "simgpuGetPhysicalUsage"));
  // The handle stays open for the life of the process, as cudart's does.
  return api;
}

void Check(const DriverApi& api, CUresult result, const std::string& what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "unknown CUresult";
  }
  std::string message = what + " failed: " + name + " (" + std::to_string(result) + ")";
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemory(result, message);
  throw DriverError(result, message);
}

}  // namespace chameleon::train_sim
