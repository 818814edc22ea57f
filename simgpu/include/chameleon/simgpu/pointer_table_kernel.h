// simgpu's pointer-table kernel: a kernel that reaches memory through a device-side table of
// device pointers, the access pattern no driver-API interposer can see (docs/simgpu.md, "Kernels
// shipped with simgpu"; docs/executor.md, "Pointer tables"). Workloads and tests put
// kGatherViaTableKernel into their ModuleImage like any other kernel.
//
//   gather_via_table(const CUdeviceptr* table, u64 n, u64 bytes_per_entry, void* out)
//     for i in [0, n): copy bytes_per_entry bytes from table[i] to out + i * bytes_per_entry
//
// Only `table` and `out` are launch arguments; the n sources are read from device memory when
// the kernel runs, so a source that is swapped out (unmapped) faults with a sticky
// CUDA_ERROR_ILLEGAL_ADDRESS, and one whose VA aliases another tensor's memory reads that data.
// Header-only (the kernel is a host function, as all simgpu kernels are); stateless, so
// concurrent launches are safe as long as their outputs do not overlap.
#pragma once

#include <cstdint>
#include <cstring>

#include "chameleon/simgpu/module_image.h"

namespace chameleon::simgpu {

inline constexpr const char* kGatherViaTableName = "gather_via_table";

/// Host function of gather_via_table (parameters as in cuLaunchKernel's kernelParams).
inline void GatherViaTableFn(void* const* params, const LaunchDims&) {
  const auto* table = *static_cast<const std::uint64_t* const*>(params[0]);
  const auto n = *static_cast<const std::uint64_t*>(params[1]);
  const auto bytes = *static_cast<const std::uint64_t*>(params[2]);
  auto* out = *static_cast<unsigned char* const*>(params[3]);
  for (std::uint64_t i = 0; i < n; ++i) {
    // The table entry is read at run time: this is the dereference no launch argument names.
    const auto* src = reinterpret_cast<const unsigned char*>(table[i]);
    std::memcpy(out + i * bytes, src, bytes);
  }
}

/// Timing: reads the table and the n sources, writes the output (no flops); computed from the
/// parameter values only (a cost function must not read device memory).
inline KernelCost GatherViaTableCost(void* const* params, const LaunchDims&) {
  const auto n = static_cast<double>(*static_cast<const std::uint64_t*>(params[1]));
  const auto bytes = static_cast<double>(*static_cast<const std::uint64_t*>(params[2]));
  return {0.0, 8.0 * n + 2.0 * n * bytes};
}

/// The kernel's module-image entry: four 8-byte parameters (table, n, bytes_per_entry, out).
inline constexpr KernelEntry kGatherViaTableKernel{kGatherViaTableName,
                                                   GatherViaTableFn,
                                                   GatherViaTableCost,
                                                   4,
                                                   {{0, 8}, {8, 8}, {16, 8}, {24, 8}}};

}  // namespace chameleon::simgpu
