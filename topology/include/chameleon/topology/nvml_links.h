// NVLink state of the node's GPUs from NVML, loaded at run time: dlopen `libnvidia-ml.so.1`,
// dlsym the five functions it needs, ask each GPU (by PCI bus id) which of its links are active
// and where each leads. Never needed to build; on a machine without NVIDIA's driver the library
// is absent and `status` says so. Thread-safe only as far as NVML is (call from one thread).
#pragma once

#include <string>
#include <vector>

namespace chameleon::topology {

/// Bytes/s per direction of one NVLink lane group ("link") from NVLink 2 to 4 (V100, A100,
/// H100/H200: 25 GB/s each way). NVLink 5 doubles it; counting it at this figure only
/// under-promises.
inline constexpr double kNvLinkBandwidthPerLink = 25e9;

/// One GPU's active NVLinks.
struct NvmlGpuLinks {
  std::string pci_bus_id;            ///< as asked (normalised)
  std::vector<std::string> remotes;  ///< bus id at the far end of each active link (a GPU or an
                                     ///< NVSwitch), normalised
};

struct NvmlLinks {
  bool loaded = false;             ///< the library loaded and nvmlInit_v2 succeeded
  std::string status;              ///< "loaded", or why not ("cannot load libnvidia-ml.so.1: ...")
  std::vector<NvmlGpuLinks> gpus;  ///< GPUs NVML knows, in the order asked
  std::vector<std::string> warnings;  ///< GPUs NVML did not know, one line each
};

/// Reads the NVLinks of each GPU in `bus_ids` through the NVML at `library`.
NvmlLinks ReadNvmlLinks(const std::string& library, const std::vector<std::string>& bus_ids);

/// Bytes/s per direction from GPU `a` to `b` over NVLink: their direct links, else (both on
/// NVSwitches) the fewer of their switch links; 0 when NVML knows no NVLink path between them.
double NvLinkBandwidth(const NvmlLinks& links, const std::string& a, const std::string& b);

}  // namespace chameleon::topology
