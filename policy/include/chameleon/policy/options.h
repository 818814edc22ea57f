// Parameters of the swap-policy generator (policy/generator.h) and the candidate configurations
// the daemon tries during its GEN_POLICY stage.
#pragma once

#include <cstdint>
#include <vector>

namespace chameleon::policy {

/// Knobs of one policy generation. Plain value type; thread-compatible.
struct GeneratorOptions {
  /// Device memory the iteration must fit in (bytes). Required: 0 is rejected.
  std::uint64_t device_limit_bytes = 0;
  /// Device -> host (and host -> device) link bandwidth, bytes per second. The default is a
  /// PCIe 4.0 x16 link's practical copy rate. Used for a direction whose own figure below is 0.
  double host_bandwidth_bytes_per_s = 25e9;
  /// Per-direction figures (0 = host_bandwidth_bytes_per_s): host links are not symmetric (an
  /// H100 on PCIe Gen5 x16 copies 46.8 GB/s device -> host and 54.8 GB/s host -> device). The
  /// daemon fills them from the node topology of the client's GPU (docs/policy.md, "Link").
  double device_to_host_bytes_per_s = 0;
  double host_to_device_bytes_per_s = 0;
  /// Congestion factor: the fraction of the nominal bandwidth a transfer really gets when it
  /// overlaps compute (DMA contends with kernels for memory bandwidth). In (0, 1].
  double link_efficiency = 0.8;
  /// PCIe is full duplex: swap-outs and swap-ins use separate capacity. When false they share one.
  bool full_duplex = true;
  /// C in score = N̂_MRE + C·Ŝ (both normalised to [0, 1] over the candidates).
  double size_weight = 0.7;
  /// A swap-in must finish this fraction of its transfer time before the use (safety margin
  /// against jitter in the per-layer time estimate).
  double prefetch_margin = 0.1;
  /// Tensors smaller than this are not worth a transfer (PCIe needs large copies to reach its
  /// bandwidth; per-copy overhead dominates below ~1 MiB).
  std::uint64_t min_swap_bytes = 1ull << 20;
  /// Also swap tensors that live across iterations (parameters, optimizer state) between their
  /// last use and their first use in the next iteration. The only swaps possible in a
  /// forward-only iteration, where nothing is re-read later in the same iteration.
  bool cross_iteration = true;
  /// Logical layers per phase; 0 = Profile::layers_hint, or kDefaultLayersPerPhase when that is 0.
  std::uint32_t layers_per_phase = 0;

  // The executor's memory model (docs/policy.md, "Executor memory model"). The defaults describe
  // an ideal executor; the daemon fills them from what the shim's executor really does, so a plan
  // that fits here fits there without OOM evictions.

  /// Allocation granularity of the executor: a swappable tensor of at least min_swap_bytes
  /// occupies its bytes rounded up to a multiple of this on the device, and a swap frees (and a
  /// swap-in takes) the rounded bytes; copies still move the tensor's own bytes. Other tensors
  /// (passed through) keep their size. 0 = no rounding.
  std::uint64_t chunk_bytes = 0;
  /// Bytes the plan leaves unused below device_limit_bytes, for device memory the profile does
  /// not show (allocator slack, allocations outside the recorded iteration). Must be below the
  /// limit.
  std::uint64_t reserve_bytes = 0;
  /// Memory is accounted when transfers are *issued*, as the shim's executor does: a swap-out
  /// releases the tensor's memory right after its last use (whoever takes it waits for the copy
  /// on the device, a stall when the link is late), and a swap-in takes it when issued. The bytes
  /// are then off for ops (out_after_op, in_start_op), and every swap-in is issued as early as
  /// memory allows (right after the last op it must relieve), which a transfer-bound iteration
  /// needs and an idle link does not mind. false: the bytes leave at the layer after the copy
  /// completes and the swap-in is placed as late as the link allows (the paper's model).
  bool release_at_issue = false;
  /// With release_at_issue, when no plan fits with gaps of at least two logical layers, search
  /// again with gaps of any length (one op between the uses is enough). The memory model needs no
  /// link time for the bytes to be off; the transfers of a short gap stall the ops around it.
  /// A working set that leaves no room at an op (three 256 MiB tensors around the attention of
  /// the Megatron trace at a quarter of its peak, one of which must leave for one op every layer)
  /// is feasible only so (docs/policy.md, "Short gaps"). Plans that fit without are unchanged.
  bool short_gaps = true;
};

/// Whether a plan that does not fit with the paper's gaps is searched again with short ones.
inline bool UsesShortGaps(const GeneratorOptions& o) { return o.release_at_issue && o.short_gaps; }

/// The swap-out (device -> host) and swap-in (host -> device) bandwidths `o` plans with.
inline double OutBandwidth(const GeneratorOptions& o) {
  return o.device_to_host_bytes_per_s > 0 ? o.device_to_host_bytes_per_s
                                          : o.host_bandwidth_bytes_per_s;
}
inline double InBandwidth(const GeneratorOptions& o) {
  return o.host_to_device_bytes_per_s > 0 ? o.host_to_device_bytes_per_s
                                          : o.host_bandwidth_bytes_per_s;
}

/// Used when neither the options nor the profile say how many layers the model has.
inline constexpr std::uint32_t kDefaultLayersPerPhase = 32;

/// `count` configurations for GEN_POLICY: the base first, then variations of the size weight C
/// and the prefetch margin (the two knobs whose best value depends on the workload). Deterministic.
std::vector<GeneratorOptions> CandidateConfigs(const GeneratorOptions& base, std::uint32_t count);

}  // namespace chameleon::policy
