// The node's GPUs from every client's reports: one row per PCI bus id, reports of one GPU by
// several clients merged (peer lists united: each client sees only its CUDA_VISIBLE_DEVICES) or
// refused when they disagree. Internal to topology/; defined in node.cc; pure, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>


namespace chameleon::topology {
struct GpuReport;  // node.h; not included, so that node.cc -> node_gpus.h stays one-way
}  // namespace chameleon::topology

namespace chameleon::topology::detail {

/// A node can hold no more GPUs than a HELLO peer mask has bits.
inline constexpr std::size_t kMaxNodeGpus = 64;
/// More device memory than any GPU has (H200: 141 GB); a larger report is corrupt.
inline constexpr std::uint64_t kMaxGpuMemory = 1ull << 44;  // 16 TiB

struct MergedGpu {
  std::string pci_bus_id;  ///< normalised
  int host_numa_node = -1;
  std::uint64_t total_memory = 0;
  std::vector<std::string> peers;  ///< normalised, sorted, unique, only GPUs of the node
};

/// Merges `reports` into `out`, sorted by bus id. Returns "" or one line naming the GPU.
std::string MergeGpuReports(const std::vector<GpuReport>& reports, std::vector<MergedGpu>* out);

}  // namespace chameleon::topology::detail
