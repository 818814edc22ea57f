// CUDA_VISIBLE_DEVICES through the driver API: the listed node devices become ordinals 0.. in
// order, and every fact that names a device across processes (PCI bus id, UUID, host NUMA node,
// peer links) is the node device's.
#include <cstring>
#include <fstream>

#include "test_util.h"

namespace simgpu_test {
namespace {

class VisibleDevicesTest : public ::testing::Test {
 protected:
  static std::string BusId(CUdevice d) {
    char id[32] = {};
    EXPECT_CU(cuDeviceGetPCIBusId(id, sizeof id, d));
    return id;
  }
  static int Attribute(CUdevice_attribute a, CUdevice d) {
    int v = -1;
    EXPECT_CU(cuDeviceGetAttribute(&v, a, d));
    return v;
  }
  static int Count() {
    int n = -1;
    EXPECT_CU(cuDeviceGetCount(&n));
    return n;
  }
};

TEST_F(VisibleDevicesTest, UnsetShowsEveryNodeDeviceInOrder) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("SIMGPU_DEVICES", "3", 1);
  ASSERT_CU(cuInit(0));
  ASSERT_EQ(Count(), 3);
  EXPECT_EQ(BusId(2), "0000:1a:00.0");
}

TEST_F(VisibleDevicesTest, ListedNodeDevicesBecomeOrdinalsInListOrder) {
  setenv("SIMGPU_MACHINE", "h200-sxm", 1);  // GPUs 0-3 on NUMA node 0, 4-7 on node 1
  setenv("SIMGPU_DEVICES", "8", 1);
  setenv("CUDA_VISIBLE_DEVICES", "5, 1", 1);
  ASSERT_CU(cuInit(0));
  ASSERT_EQ(Count(), 2);
  EXPECT_EQ(BusId(0), "0000:1d:00.0");  // 0x18 + 5
  EXPECT_EQ(BusId(1), "0000:19:00.0");
  EXPECT_EQ(Attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0), 0x18 + 5);
  EXPECT_EQ(Attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0), 1);
  EXPECT_EQ(Attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 1), 0);
  CUuuid uuid;
  ASSERT_CU(cuDeviceGetUuid_v2(&uuid, 0));
  EXPECT_EQ(uuid.bytes[15], 5);
  EXPECT_EQ(std::memcmp(uuid.bytes, "simgpu", 6), 0);
  CUdevice d = -1;
  EXPECT_EQ(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(VisibleDevicesTest, PeerLinksFollowTheNodeDevices) {
  const std::string path = UniqueTempPath("simgpu_visible_topology");
  std::ofstream(path) << "peer_links:\n  - {from: 1, to: 3, bandwidth: 1.0e11}\n";
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  setenv("SIMGPU_DEVICES", "4", 1);
  setenv("CUDA_VISIBLE_DEVICES", "3,0,1", 1);
  ASSERT_CU(cuInit(0));
  int can = -1;
  ASSERT_CU(cuDeviceCanAccessPeer(&can, 0, 2));  // node 3 -> node 1: the one link
  EXPECT_EQ(can, 1);
  ASSERT_CU(cuDeviceCanAccessPeer(&can, 2, 0));
  EXPECT_EQ(can, 1);
  ASSERT_CU(cuDeviceCanAccessPeer(&can, 0, 1));  // node 3 -> node 0: none
  EXPECT_EQ(can, 0);
  ASSERT_CU(cuDeviceCanAccessPeer(&can, 1, 2));
  EXPECT_EQ(can, 0);
  int rank = -1;
  ASSERT_CU(cuDeviceGetP2PAttribute(&rank, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 2, 0));
  EXPECT_EQ(rank, 1);
}

TEST_F(VisibleDevicesTest, AUuidNamesANodeDevice) {
  setenv("SIMGPU_DEVICES", "4", 1);
  setenv("CUDA_VISIBLE_DEVICES", "GPU-73696d67-7075-0000-0000-000000000002", 1);
  ASSERT_CU(cuInit(0));
  ASSERT_EQ(Count(), 1);
  EXPECT_EQ(BusId(0), "0000:1a:00.0");
}

TEST_F(VisibleDevicesTest, AnEmptyListMeansNoDevice) {
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

TEST_F(VisibleDevicesTest, AnIndexPastTheNodeFailsCuInit) {
  setenv("SIMGPU_DEVICES", "2", 1);
  setenv("CUDA_VISIBLE_DEVICES", "0,2", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
  int n = -1;
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}

TEST_F(VisibleDevicesTest, ADuplicateFailsCuInit) {
  setenv("SIMGPU_DEVICES", "2", 1);
  setenv("CUDA_VISIBLE_DEVICES", "1,1", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace simgpu_test
