// Simulated node configuration: devices, capacities, links and the timing model's parameters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chameleon::simgpu {

inline constexpr int kMaxDevices = 16;
inline constexpr std::uint64_t kGiB = 1ull << 30;

/// Everything the environment (SIMGPU_DEVICES, SIMGPU_MEMORY, SIMGPU_TOPOLOGY, SIMGPU_REPORT)
/// can set. Defaults are documented in docs/simgpu.md. Plain value type.
struct Config {
  int device_count = 1;
  std::vector<std::uint64_t> memory_bytes;  ///< per device
  std::vector<int> numa_node;               ///< per device
  /// peer_bandwidth[a][b]: bytes/s of the a->b link; 0 = no direct link (copies go via host).
  std::vector<std::vector<double>> peer_bandwidth;
  // Defaults calibrated against ../shared/traces/megatron_kineto_0.json.gz (A100-SXM4-80GB);
  // docs/simgpu.md shows the fit.
  double host_link_bandwidth = 25e9;  ///< bytes/s per direction (PCIe Gen4 x16, achieved)
  double peak_flops = 2.6e14;         ///< achieved fp16 tensor-core GEMM throughput
  double hbm_bandwidth = 1.5e12;      ///< achieved HBM2e bandwidth, bytes/s
  /// bytes/s a collective kernel (KernelCost::link_bytes) moves per GPU over NVLink; the
  /// NVLink3 figure of the default peer links.
  double peer_link_bandwidth = 2.5e11;
  std::uint64_t launch_latency_ns = 2000;  ///< fixed device-side cost of every kernel
  std::uint64_t copy_latency_ns = 1000;    ///< fixed cost of every copy / memset
  std::uint64_t host_call_ns = 1000;       ///< host clock advance per driver call
  bool report = false;                     ///< SIMGPU_REPORT=1: peaks to stderr at exit
};

/// Parses a positive size by the one byte-size grammar (chameleon/ipc/byte_size.h: "2GiB" = 2^31,
/// "2G" = 2 * 10^9). False on 0 and on anything the grammar rejects.
bool ParseSize(std::string_view text, std::uint64_t* out);

/// Builds the configuration from the environment. Returns "" on success, else a message that
/// names the offending variable; `out` then holds defaults.
std::string LoadConfig(Config* out);

}  // namespace chameleon::simgpu
