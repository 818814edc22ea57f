// GatherDeviceFacts (shim/src/device_facts.h) against a hand-made driver table: the facts HELLO
// carries per device (total memory, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, PCI bus id, the
// cuDeviceCanAccessPeer mask) and the "unknown" values where the driver cannot say.
#include "device_facts.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

namespace chameleon::shim {
namespace {

// A three-device driver whose CUdevice handles are not the ordinals (10, 11, 12), so that a
// mix-up between the two shows. Device 11 does not know its NUMA node; 10 and 12 reach each
// other directly, 11 reaches nobody.
bool g_initialised = false;
CUresult Init(unsigned) {
  g_initialised = true;
  return CUDA_SUCCESS;
}
CUresult Count(int* n) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *n = 3;
  return CUDA_SUCCESS;
}
CUresult Get(CUdevice* d, int ordinal) {
  *d = 10 + ordinal;
  return CUDA_SUCCESS;
}
CUresult TotalMem(size_t* bytes, CUdevice d) {
  *bytes = static_cast<size_t>(d) << 30;
  return CUDA_SUCCESS;
}
CUresult Attribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (a != CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID || d == 11) return CUDA_ERROR_INVALID_VALUE;
  *v = d == 10 ? 0 : 1;
  return CUDA_SUCCESS;
}
CUresult BusId(char* id, int len, CUdevice d) {
  // Real drivers write upper-case hex; the daemon normalises.
  std::snprintf(id, static_cast<std::size_t>(len), "0000:%02X:00.0", 0x1a + (d - 10));
  return CUDA_SUCCESS;
}
CUresult CanAccess(int* can, CUdevice a, CUdevice b) {
  *can = (a == 10 && b == 12) || (a == 12 && b == 10);
  return CUDA_SUCCESS;
}

DriverAux Driver() {
  DriverAux aux;
  aux.init = Init;
  aux.device_get_count = Count;
  aux.device_get = Get;
  aux.device_total_mem = TotalMem;
  aux.device_get_attribute = Attribute;
  aux.device_get_pci_bus_id = BusId;
  aux.device_can_access_peer = CanAccess;
  return aux;
}

TEST(DeviceFactsTest, ShouldReportEachDevicesFactsByOrdinal) {
  g_initialised = false;  // the shim may be first: it calls cuInit itself
  const auto facts = GatherDeviceFacts(Driver());
  ASSERT_EQ(facts.size(), 3u);
  EXPECT_EQ(facts[0].ordinal, 0);
  EXPECT_EQ(facts[2].ordinal, 2);
  EXPECT_EQ(facts[1].total_memory, 11ull << 30);
  EXPECT_EQ(facts[0].host_numa_node, 0);
  EXPECT_EQ(facts[1].host_numa_node, -1);  // the attribute failed: unknown, not 0
  EXPECT_EQ(facts[2].host_numa_node, 1);
  EXPECT_STREQ(facts[0].pci_bus_id, "0000:1A:00.0");
  EXPECT_STREQ(facts[2].pci_bus_id, "0000:1C:00.0");
  // Peer bits are ordinals of this process, asked with the driver's handles.
  EXPECT_EQ(facts[0].peer_mask, 0b100u);
  EXPECT_EQ(facts[1].peer_mask, 0u);
  EXPECT_EQ(facts[2].peer_mask, 0b001u);
}

TEST(DeviceFactsTest, ShouldLeaveUnknownsWhenTheDriverLacksTheQueries) {
  g_initialised = true;
  DriverAux aux = Driver();
  aux.device_get_attribute = nullptr;
  aux.device_get_pci_bus_id = nullptr;
  aux.device_can_access_peer = nullptr;
  const auto facts = GatherDeviceFacts(aux);
  ASSERT_EQ(facts.size(), 3u);
  EXPECT_EQ(facts[0].host_numa_node, -1);
  EXPECT_EQ(std::strlen(facts[0].pci_bus_id), 0u);
  EXPECT_EQ(facts[0].peer_mask, 0u);
}

TEST(DeviceFactsTest, ShouldReportNothingWithoutADriver) {
  EXPECT_TRUE(GatherDeviceFacts(DriverAux{}).empty());
}

}  // namespace
}  // namespace chameleon::shim
