// The replayer's simgpu module: three host "kernels".
//   replay_op     one trace op (one kernel per op name, named after it): reads one 8-byte sample
//   per `stride` bytes of each input, folds
//                 them into a value, writes a function of it into the same samples of each
//                 output, and chains it into a device-side running digest. A lost, stale or
//                 misplaced page anywhere therefore changes the final checksum, while an
//                 iteration stays cheap. Its cost (bytes for simgpu's virtual clock) is a param.
//   replay_init   fills the samples of a fresh storage with a function of its identity, so
//                 nothing depends on what memory happened to contain (placement-independent).
//   replay_digest folds the samples of a storage into the digest (the final checksum).
// Offsets are relative to each allocation, so results never depend on addresses.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/simgpu/module_image.h"

namespace chameleon::replay {

/// Tensors one replay_op launch carries (6 fixed params + 2 per tensor <= kMaxKernelParams).
inline constexpr std::uint32_t kTensorsPerLaunch = 13;

/// The parameter values of one replay_op launch. Sizes are in 8-byte words and 32-bit, so no
/// non-pointer parameter is pointer-sized (simgpu checks every pointer-sized argument).
struct OpLaunch {
  std::uint32_t salt = 0;  ///< identifies the op (token, chunk): same inputs, different ops differ
  std::uint32_t n_in = 0;
  std::uint32_t n_out = 0;
  float cost_bytes = 0;  ///< what simgpu's cost model charges (time = bytes / HBM bandwidth)
  std::uint32_t stride = 4096;
  CUdeviceptr digest = 0;  ///< 8-byte running digest in device memory
  CUdeviceptr ptr[kTensorsPerLaunch] = {};
  std::uint32_t words[kTensorsPerLaunch] = {};

  /// Fills `out` (kMaxKernelParams entries) with pointers to the fields in parameter order.
  void ParamPointers(void** out);
};

struct InitLaunch {
  CUdeviceptr ptr = 0;
  std::uint32_t words = 0;
  std::uint32_t stride = 4096;
  std::uint32_t seed_lo = 0, seed_hi = 0;
  void ParamPointers(void** out);
};

struct DigestLaunch {
  CUdeviceptr digest = 0;
  CUdeviceptr ptr = 0;
  std::uint32_t words = 0;
  std::uint32_t stride = 4096;
  void ParamPointers(void** out);
};

inline constexpr const char* kProbeKernel = "replay_probe";  // replay_op body, for calibration
inline constexpr const char* kInitKernel = "replay_init";
inline constexpr const char* kDigestKernel = "replay_digest";

/// The module image to pass to cuModuleLoadData: init, digest and probe kernels plus one
/// replay_op kernel per distinct op name, named after it, so that whoever watches the driver
/// (the shim's tokeniser) sees as many distinct kernels as the trace has op names. Must outlive
/// the loaded module. Not thread-safe.
class ReplayModule {
 public:
  explicit ReplayModule(const std::vector<std::string>& op_names);
  ReplayModule(const ReplayModule&) = delete;
  ReplayModule& operator=(const ReplayModule&) = delete;

  const simgpu::ModuleImage& image() const { return image_; }

 private:
  std::vector<std::string> names_;
  std::vector<simgpu::KernelEntry> entries_;
  simgpu::ModuleImage image_{};
};

}  // namespace chameleon::replay
