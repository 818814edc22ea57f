#include "device_facts.h"

#include <cstring>

namespace chameleon::shim {

std::vector<ipc::DeviceFacts> GatherDeviceFacts(const DriverAux& aux) {
  std::vector<ipc::DeviceFacts> facts;
  int count = 0;
  if (aux.device_get_count == nullptr || aux.device_get == nullptr) return facts;
  // By the time a tracked call reaches us the program has called cuInit; calling it again with
  // the only legal flag value is harmless and covers programs that reach us first.
  if (aux.device_get_count(&count) == CUDA_ERROR_NOT_INITIALIZED && aux.init != nullptr) {
    if (aux.init(0) != CUDA_SUCCESS || aux.device_get_count(&count) != CUDA_SUCCESS) return facts;
  }
  if (count < 0) count = 0;
  if (count > static_cast<int>(ipc::kMaxDevices)) count = static_cast<int>(ipc::kMaxDevices);
  std::vector<CUdevice> devices(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (aux.device_get(&devices[static_cast<std::size_t>(i)], i) != CUDA_SUCCESS) devices[i] = i;
  }
  for (int i = 0; i < count; ++i) {
    ipc::DeviceFacts f{};
    f.ordinal = i;
    f.host_numa_node = -1;
    const CUdevice dev = devices[static_cast<std::size_t>(i)];
    size_t total = 0;
    if (aux.device_total_mem != nullptr && aux.device_total_mem(&total, dev) == CUDA_SUCCESS) {
      f.total_memory = total;
    }
    int numa = -1;
    if (aux.device_get_attribute != nullptr &&
        aux.device_get_attribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) == CUDA_SUCCESS) {
      f.host_numa_node = numa;
    }
    char bus[sizeof(f.pci_bus_id)] = {};
    if (aux.device_get_pci_bus_id != nullptr &&
        aux.device_get_pci_bus_id(bus, sizeof(bus), dev) == CUDA_SUCCESS) {
      bus[sizeof(bus) - 1] = '\0';
      std::memcpy(f.pci_bus_id, bus, sizeof(bus));
    }
    for (int j = 0; j < count && aux.device_can_access_peer != nullptr; ++j) {
      int can = 0;
      if (j != i &&
          aux.device_can_access_peer(&can, dev, devices[static_cast<std::size_t>(j)]) ==
              CUDA_SUCCESS &&
          can) {
        f.peer_mask |= 1ull << j;
      }
    }
    facts.push_back(f);
  }
  return facts;
}

}  // namespace chameleon::shim
