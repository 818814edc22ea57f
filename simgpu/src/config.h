// Simulated node configuration: devices, capacities, links and the timing model's parameters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chameleon::simgpu {

inline constexpr int kMaxDevices = 16;
inline constexpr std::uint64_t kGiB = 1ull << 30;

/// Everything the environment (SIMGPU_MACHINE, SIMGPU_DEVICES, SIMGPU_MEMORY, SIMGPU_TOPOLOGY,
/// SIMGPU_REPORT) can set. The figures have no defaults here: the machine preset
/// (simgpu/machines/<name>.yaml, default a100-pcie4) defines every one of them, and
/// SIMGPU_TOPOLOGY and the variables override it. docs/simgpu.md "Machines". Plain value type.
struct Config {
  std::string machine;              ///< the preset's `machine` key (SIMGPU_TOPOLOGY may rename it)
  int device_count = 1;             ///< devices this process sees (SIMGPU_DEVICES, narrowed
                                    ///< by CUDA_VISIBLE_DEVICES: visible_devices.h)
  int node_device_count = 1;        ///< SIMGPU_DEVICES: devices of the simulated node
  std::vector<int> node_index;      ///< per ordinal: its node device (identity without CVD)
  std::string node_name;            ///< SIMGPU_NODE: the node-wide ledger's name ("" = none)
  int gpus_per_node = 0;            ///< GPUs of the modelled node (informational; not device_count)
  std::uint64_t device_memory = 0;  ///< capacity of each device unless SIMGPU_MEMORY
  std::vector<std::uint64_t> memory_bytes;     ///< per device
  std::vector<int> numa_node;                  ///< per device (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)
  std::vector<int> gpu_numa_nodes;             ///< per GPU of the node; device i takes [i % size]
  std::vector<std::uint64_t> host_numa_bytes;  ///< host DRAM per NUMA node
  /// peer_bandwidth[a][b]: bytes/s of the a->b link; 0 = no direct link (copies go via host).
  std::vector<std::vector<double>> peer_bandwidth;
  double host_to_device_bandwidth = 0;  ///< bytes/s, per device, achieved
  double device_to_host_bandwidth = 0;  ///< bytes/s, per device, achieved
  double peer_link_bandwidth = 0;       ///< bytes/s per direction of each default peer link
  double numa_link_bandwidth = 0;       ///< bytes/s per direction between two host NUMA nodes
  double peak_flops = 0;                ///< achieved GEMM throughput (peak x fraction or a fit)
  double hbm_bandwidth = 0;             ///< achieved HBM bytes/s (peak x fraction or a fit)
  double gemm_peak_flops = 0;           ///< bf16 dense peak (0: peak_flops was given directly)
  double gemm_fraction = 0;             ///< achieved / peak GEMM (0: likewise)
  double hbm_peak_bandwidth = 0;        ///< datasheet HBM bytes/s (0: hbm_bandwidth was direct)
  double hbm_fraction = 0;              ///< achieved / peak HBM (0: likewise)
  std::uint64_t launch_latency_ns = 0;  ///< fixed device-side cost of every kernel
  std::uint64_t copy_latency_ns = 0;    ///< fixed cost of every copy / memset
  std::uint64_t host_call_ns = 0;       ///< host clock advance per driver call
  bool report = false;                  ///< SIMGPU_REPORT=1: peaks to stderr at exit

  /// The slower host-link direction: what a transfer that needs both (a peer copy staged through
  /// host memory, a kernel that reads and writes host memory) gets.
  double host_link_bandwidth() const {
    return host_to_device_bandwidth < device_to_host_bandwidth ? host_to_device_bandwidth
                                                               : device_to_host_bandwidth;
  }
};

/// Parses a positive size by the one byte-size grammar (chameleon/ipc/byte_size.h: "2GiB" = 2^31,
/// "2G" = 2 * 10^9). False on 0 and on anything the grammar rejects.
bool ParseSize(std::string_view text, std::uint64_t* out);

/// Builds the configuration of the node (every node device; ApplyVisibleDevices then narrows it
/// to this process's) from the environment. Returns "" on success, else a message that
/// names the offending variable; `out` is then unusable (cuInit fails).
std::string LoadConfig(Config* out);

}  // namespace chameleon::simgpu
