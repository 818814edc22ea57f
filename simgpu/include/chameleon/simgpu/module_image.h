// The simgpu "module image": what a workload passes to cuModuleLoadData on the simulated driver
// instead of a cubin. Kernels are host functions; each declares its parameter layout (so the
// driver can answer cuFuncGetParamInfo and unpack CU_LAUNCH_PARAM_BUFFER_POINTER) and a cost model
// (so the virtual clock can time it). Device pointers in simgpu are host virtual addresses, so a
// kernel dereferences its CUdeviceptr arguments directly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chameleon::simgpu {

/// "SGMI" little-endian.
inline constexpr std::uint32_t kModuleImageMagic = 0x494d4753u;
inline constexpr std::uint32_t kModuleImageVersion = 1;
inline constexpr std::uint32_t kMaxKernelParams = 32;

/// Work a launch does, for the virtual clock: time = max(flops / peak_flops, bytes / hbm_bw)
/// plus a fixed launch latency (docs/simgpu.md).
struct KernelCost {
  double flops = 0;
  double bytes = 0;
};

/// Launch geometry handed to the kernel, as cuLaunchKernel received it.
struct LaunchDims {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
};

/// `params[i]` points at the value of parameter i (exactly like cuLaunchKernel's kernelParams).
using KernelHostFn = void (*)(void* const* params, const LaunchDims& dims);
/// May be null: the kernel then costs only the launch latency.
using KernelCostFn = KernelCost (*)(void* const* params, const LaunchDims& dims);

struct ParamLayout {
  std::uint32_t offset;  ///< byte offset in a packed parameter buffer
  std::uint32_t size;    ///< bytes
};

struct KernelEntry {
  const char* name;
  KernelHostFn fn;
  KernelCostFn cost;
  std::uint32_t param_count;  ///< <= kMaxKernelParams
  ParamLayout params[kMaxKernelParams];
};

/// The image itself. It must outlive the module (simgpu keeps pointers into it).
struct ModuleImage {
  std::uint32_t magic;    ///< kModuleImageMagic
  std::uint32_t version;  ///< kModuleImageVersion
  std::uint32_t kernel_count;
  std::uint32_t reserved;
  const KernelEntry* kernels;
};

}  // namespace chameleon::simgpu
