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
/// Version 2 added KernelCost::link_bytes; version-1 images (two-field cost) still load.
inline constexpr std::uint32_t kModuleImageVersion = 2;
inline constexpr std::uint32_t kMaxKernelParams = 32;

/// Work a launch does, for the virtual clock: time = max(flops / peak_flops, bytes / hbm_bw,
/// link_bytes / peer_link_bandwidth) plus a fixed launch latency (docs/simgpu.md).
struct KernelCost {
  double flops = 0;
  double bytes = 0;
  double link_bytes = 0;  ///< bytes a collective moves over the GPU-to-GPU link (per GPU)
};

/// The cost of a version-1 image: no link bytes. Kept so that images built before version 2
/// (whose cost functions return this two-double struct) still load and time correctly.
struct KernelCostV1 {
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
/// What a version-1 image's `cost` pointer really is (simgpu casts back before calling it).
using KernelCostFnV1 = KernelCostV1 (*)(void* const* params, const LaunchDims& dims);

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
