#include "chameleon/topology/nvml_links.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>

namespace chameleon::topology {
namespace {

// The slice of nvml.h we use, declared here so that nothing of NVIDIA's is needed to build.
// nvmlPciInfo_t as the _v2 remote-PCI query fills it (nvml.h since NVML 2.285).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
static_assert(sizeof(NvmlPciInfo) == 68);
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;
// NVML_NVLINK_MAX_LINKS in nvml.h of CUDA 12 (H100/H200 have 18 links).
constexpr unsigned kMaxLinks = 18;

struct NvmlApi {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*handle_by_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*link_state)(NvmlDevice, unsigned, int*) = nullptr;
  int (*remote_pci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
};

template <typename F>
bool Resolve(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

std::string ResolveAll(void* lib, NvmlApi* api) {
  std::string missing;
  Resolve(lib, "nvmlInit_v2", &api->init, &missing);
  Resolve(lib, "nvmlShutdown", &api->shutdown, &missing);
  Resolve(lib, "nvmlDeviceGetHandleByPciBusId_v2", &api->handle_by_bus_id, &missing);
  Resolve(lib, "nvmlDeviceGetNvLinkState", &api->link_state, &missing);
  Resolve(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &api->remote_pci, &missing);
  return missing.empty() ? "" : "no symbol " + missing;
}

// The far end of link `l` from the numeric fields, which every NVML version fills alike (the
// strings' domain width changed over versions). NVLink ends are function 0.
bool RemoteBusId(const NvmlApi& api, NvmlDevice dev, unsigned l, std::string* out) {
  NvmlPciInfo pci{};
  if (api.remote_pci(dev, l, &pci) != kNvmlSuccess) return false;
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.0", pci.domain & 0xffff, pci.bus & 0xff,
                pci.device & 0x1f);
  *out = text;  // already the canonical form (node.h NormalizePciBusId): lower-case, 4-digit
  return true;
}

NvmlGpuLinks GpuLinks(const NvmlApi& api, NvmlDevice dev, const std::string& bus_id) {
  NvmlGpuLinks g{bus_id, {}};
  for (unsigned l = 0; l < kMaxLinks; ++l) {
    int active = 0;
    // A link index the GPU does not have returns an error: that GPU has fewer links.
    if (api.link_state(dev, l, &active) != kNvmlSuccess) continue;
    std::string remote;
    if (active == kNvmlFeatureEnabled && RemoteBusId(api, dev, l, &remote))
      g.remotes.push_back(remote);
  }
  return g;
}

void ReadGpus(const NvmlApi& api, const std::vector<std::string>& bus_ids, NvmlLinks* out) {
  for (const std::string& bus : bus_ids) {
    NvmlDevice dev = nullptr;
    if (const int rc = api.handle_by_bus_id(bus.c_str(), &dev); rc != kNvmlSuccess) {
      out->warnings.push_back("nvml: GPU " + bus + " unknown (error " + std::to_string(rc) + ")");
      continue;
    }
    out->gpus.push_back(GpuLinks(api, dev, bus));
  }
}

const NvmlGpuLinks* Find(const NvmlLinks& links, const std::string& bus) {
  for (const NvmlGpuLinks& g : links.gpus)
    if (g.pci_bus_id == bus) return &g;
  return nullptr;
}

// Links of `g` that lead to no GPU NVML knows: links to NVSwitches.
std::size_t SwitchLinks(const NvmlLinks& links, const NvmlGpuLinks& g) {
  return static_cast<std::size_t>(std::count_if(
      g.remotes.begin(), g.remotes.end(), [&](const std::string& r) { return !Find(links, r); }));
}

}  // namespace

NvmlLinks ReadNvmlLinks(const std::string& library, const std::vector<std::string>& bus_ids) {
  NvmlLinks out;
  // RTLD_LOCAL: NVML's symbols stay out of the daemon's namespace.
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    out.status = "cannot load " + library + ": " + (why ? why : "unknown error");
    return out;
  }
  NvmlApi api;
  if (std::string missing = ResolveAll(lib, &api); !missing.empty()) {
    out.status = library + ": " + missing;
  } else if (const int rc = api.init(); rc != kNvmlSuccess) {
    out.status = "nvmlInit_v2 failed (error " + std::to_string(rc) + ")";
  } else {
    ReadGpus(api, bus_ids, &out);
    api.shutdown();
    out.loaded = true;
    out.status = "loaded";
  }
  ::dlclose(lib);
  return out;
}

double NvLinkBandwidth(const NvmlLinks& links, const std::string& a, const std::string& b) {
  const NvmlGpuLinks* ga = Find(links, a);
  const NvmlGpuLinks* gb = Find(links, b);
  if (ga == nullptr || gb == nullptr) return 0;
  const auto direct = std::count(ga->remotes.begin(), ga->remotes.end(), b);
  if (direct > 0) return static_cast<double>(direct) * kNvLinkBandwidthPerLink;
  return static_cast<double>(std::min(SwitchLinks(links, *ga), SwitchLinks(links, *gb))) *
         kNvLinkBandwidthPerLink;
}

}  // namespace chameleon::topology
