// A stand-in for libnvidia-ml.so.1 exporting the five functions topology/nvml_links.cc loads,
// driven by fake_nvml_configure(): one line per GPU, "<bus id> <remote bus id>...", one remote
// per active link. Every GPU has 18 link indices; those past its remotes are inactive. Not
// thread-safe (tests call it from one thread).
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Gpu {
  std::string bus;
  std::vector<std::string> remotes;
};
std::vector<Gpu> g_gpus;
int g_init_rc = 0;
bool g_initialised = false;

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kNotFound = 6;
constexpr unsigned kLinks = 18;

struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

const Gpu* FromHandle(void* handle) {
  const auto i = reinterpret_cast<std::size_t>(handle);
  return i >= 1 && i <= g_gpus.size() ? &g_gpus[i - 1] : nullptr;
}

}  // namespace

extern "C" {

void fake_nvml_configure(const char* spec, int init_rc) {
  g_gpus.clear();
  g_init_rc = init_rc;
  std::istringstream lines(spec);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    Gpu g;
    if (!(words >> g.bus)) continue;
    for (std::string r; words >> r;) g.remotes.push_back(r);
    g_gpus.push_back(g);
  }
}

int nvmlInit_v2() {
  g_initialised = g_init_rc == kSuccess;
  return g_init_rc;
}

int nvmlShutdown() {
  if (!g_initialised) return kUninitialized;
  g_initialised = false;
  return kSuccess;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** device) {
  if (!g_initialised) return kUninitialized;
  for (std::size_t i = 0; i < g_gpus.size(); ++i) {
    if (g_gpus[i].bus == bus) {
      *device = reinterpret_cast<void*>(i + 1);
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceGetNvLinkState(void* device, unsigned link, int* active) {
  const Gpu* g = FromHandle(device);
  if (!g_initialised || g == nullptr || link >= kLinks) return kInvalidArgument;
  *active = link < g->remotes.size() ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned link, PciInfo* pci) {
  const Gpu* g = FromHandle(device);
  if (!g_initialised || g == nullptr || link >= g->remotes.size()) return kInvalidArgument;
  std::memset(pci, 0, sizeof(*pci));
  unsigned function = 0;
  // NVML's own strings carry an 8-digit domain; the reader must use the numbers.
  std::sscanf(g->remotes[link].c_str(), "%x:%x:%x.%x", &pci->domain, &pci->bus, &pci->device,
              &function);
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "%08x:%02x:%02x.0", pci->domain, pci->bus,
                pci->device);
  return kSuccess;
}

}  // extern "C"
