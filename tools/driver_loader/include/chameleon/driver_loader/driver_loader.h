// How Chameleon's workloads (chameleon-train-sim, chameleon-replay) reach the CUDA driver, the way
// cudart does: dlopen("libcuda.so.1") and resolve every entry point through cuGetProcAddress_v2,
// so they link no CUDA library and run on simgpu or a real driver alike.
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>

namespace chameleon::driver_loader {

/// A failed driver call or lookup; `result` is the CUresult.
class DriverError : public std::runtime_error {
 public:
  DriverError(CUresult result, const std::string& message)
      : std::runtime_error(message), result_(result) {}
  CUresult result() const { return result_; }

 private:
  CUresult result_;
};

/// CUDA_ERROR_OUT_OF_MEMORY, so tools can report it the way users expect.
class OutOfMemory : public DriverError {
 public:
  using DriverError::DriverError;
};

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

/// The opened driver. The handle stays open for the life of the process, as cudart's does.
struct OpenedDriver {
  void* handle = nullptr;
  GetProcAddressFn get_proc = nullptr;
};

/// dlopen("libcuda.so.1") (found through LD_LIBRARY_PATH) and its cuGetProcAddress_v2.
/// Throws DriverError with a clear message when either is missing.
OpenedDriver OpenDriver();

/// Resolves `name` at CUDA 13.0's ABI into `*out`; throws DriverError when unavailable.
void Resolve(const OpenedDriver& driver, const char* name, void** out);

/// Throws OutOfMemory / DriverError naming `what` unless `result` is CUDA_SUCCESS.
/// `get_error_name` (may be null) turns the code into its name for the message.
void Check(decltype(&::cuGetErrorName) get_error_name, CUresult result, const std::string& what);

}  // namespace chameleon::driver_loader
