// Loads the trainer's module image and launches its kernels on one stream.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "driver.h"
#include "kernels.h"

namespace chameleon::train_sim {

/// Owns the loaded module and launches kernels with cuLaunchKernel. It also hashes the sequence
/// of kernels launched since the last TakeSequenceHash(), which is how the trainer knows, rather
/// than assumes, when its op sequence changed (`shift at step N`). Not thread-safe.
class Launcher {
 public:
  Launcher(const DriverApi& api, CUstream stream);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  /// Launches `id` with the given arguments (CUdeviceptr, std::int32_t or float, in the order of
  /// the kernel's signature in kernels.h). The values are copied by the driver at launch.
  template <class... Args>
  void Launch(KernelId id, Args... args) {
    static_assert(((std::is_same_v<Args, CUdeviceptr> || std::is_same_v<Args, std::int32_t> ||
                    std::is_same_v<Args, float>)&&...),
                  "kernel arguments are CUdeviceptr, std::int32_t or float");
    void* params[] = {static_cast<void*>(&args)...};
    const std::uint32_t sizes[] = {static_cast<std::uint32_t>(sizeof(Args))...};
    LaunchRaw(id, params, sizes, sizeof...(Args));
  }

  /// Hash of the kernel sequence launched since the previous call; resets it.
  std::uint64_t TakeSequenceHash();

 private:
  void LaunchRaw(KernelId id, void** params, const std::uint32_t* sizes, std::uint32_t count);

  const DriverApi& api_;
  CUstream stream_;
  CUmodule module_ = nullptr;
  std::array<CUfunction, kKernelCount> functions_{};
  std::uint64_t sequence_hash_;
};

}  // namespace chameleon::train_sim
