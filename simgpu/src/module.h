// Loaded simgpu module images and their functions.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "chameleon/simgpu/module_image.h"

namespace chameleon::simgpu {

inline constexpr std::uint32_t kFunctionMagic = 0x434e5546u;
inline constexpr std::uint32_t kModuleMagic = 0x4c444f4du;
/// Upper bound on a packed parameter buffer (CUDA 12.1+ allows 32764 bytes).
inline constexpr std::uint32_t kMaxParamBytes = 32764;

struct Module;

/// A CUfunction: one kernel of a loaded image. Immutable after load.
struct Function {
  std::atomic<std::uint32_t> magic{kFunctionMagic};
  const KernelEntry* entry = nullptr;
  Module* module = nullptr;
  std::uint32_t param_bytes = 0;  ///< packed size: max(offset + size)
};

/// A CUmodule. Never freed (stale handles stay readable); unloading clears the magics.
struct Module {
  std::atomic<std::uint32_t> magic{kModuleMagic};
  const ModuleImage* image = nullptr;
  std::unique_ptr<Function[]> functions;
  std::uint32_t count = 0;
};

Function* AsFunction(CUfunction f);

}  // namespace chameleon::simgpu
