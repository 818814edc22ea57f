// Where memory of a node lives and what copies to it cost, on hand-computed cases. The topology
// file sets round numbers: 1 host-link byte = 10 ns, 1 inter-socket byte = 20 ns, 1 peer byte =
// 2 ns; copies +50 ns; every driver call advances the host clock by 10 ns (so a copy recorded
// between two events takes 10 ns + its own time). Devices 0 and 1 sit on NUMA node 0, device 2
// on node 1.
#include <fstream>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr std::size_t kChunk = 2u << 20;
constexpr double kBytes = 1000;

class NodeMemoryTest : public SimgpuTest {
 protected:
  void SetUp() override {
    const std::string path = UniqueTempPath("simgpu_node_memory_topology");
    std::ofstream(path) << "hbm_bandwidth: 1.0e9\n"
                           "host_link_bandwidth: 1.0e8\n"
                           "numa_link_bandwidth: 5.0e7\n"
                           "peer_link_bandwidth: 5.0e8\n"
                           "copy_latency_ns: 50\n"
                           "host_call_ns: 10\n"
                           "host_numa_bytes: [1GiB, 1GiB]\n"
                           "numa_nodes: [0, 0, 1]\n";
    setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
    setenv("SIMGPU_DEVICES", "3", 1);
    Init();
    for (int d = 0; d < 3; ++d) {
      ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx_of_[d], d));
      ASSERT_CU(cuCtxSetCurrent(ctx_of_[d]));
      ASSERT_CU(cuStreamCreate(&stream_of_[d], CU_STREAM_NON_BLOCKING));
      ASSERT_CU(cuMemAlloc(&local_[d], kChunk));
    }
    ASSERT_CU(cuCtxSetCurrent(ctx_));
    ASSERT_CU(cuEventCreate(&e0_, 0));
    ASSERT_CU(cuEventCreate(&e1_, 0));
  }
  // A chunk at `location` mapped read-write for device `access` at a fresh reservation.
  CUdeviceptr MappedChunk(CUmemLocation location, int access) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = location;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    EXPECT_CU(cuMemCreate(&h, kChunk, &prop, 0));
    EXPECT_CU(cuMemAddressReserve(&va, kChunk, 0, 0, 0));
    EXPECT_CU(cuMemMap(va, kChunk, 0, h, 0));
    CUmemAccessDesc desc{};
    desc.location = {CU_MEM_LOCATION_TYPE_DEVICE, access};
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    EXPECT_CU(cuMemSetAccess(va, kChunk, &desc, 1));
    return va;
  }
  // Virtual ns of one copy on device `d`'s stream, between two events.
  double CopyNs(CUdeviceptr dst, CUdeviceptr src, int d) {
    EXPECT_CU(cuCtxSetCurrent(ctx_of_[d]));
    EXPECT_CU(cuEventRecord(e0_, stream_of_[d]));
    EXPECT_CU(cuMemcpyAsync(dst, src, static_cast<size_t>(kBytes), stream_of_[d]));
    EXPECT_CU(cuEventRecord(e1_, stream_of_[d]));
    EXPECT_CU(cuEventSynchronize(e1_));
    float ms = 0;
    EXPECT_CU(cuEventElapsedTime(&ms, e0_, e1_));
    return static_cast<double>(ms) * 1e6;
  }
  static std::uint64_t Live(int d) {
    std::uint64_t live = 0, peak = 0;
    EXPECT_EQ(simgpuGetPhysicalUsage(d, &live, &peak), 0);
    return live;
  }
  CUcontext ctx_of_[3] = {};
  CUstream stream_of_[3] = {};
  CUdeviceptr local_[3] = {};
  CUevent e0_ = nullptr, e1_ = nullptr;
};

TEST_F(NodeMemoryTest, HostMemoryOnTheDevicesNodeUsesTheHostLinkOnly) {
  const CUdeviceptr host0 = MappedChunk({CU_MEM_LOCATION_TYPE_HOST_NUMA, 0}, 0);
  EXPECT_NEAR(CopyNs(local_[0], host0, 0), 10 + 50 + 10 * kBytes, 0.5);
  EXPECT_NEAR(CopyNs(host0, local_[0], 0), 10 + 50 + 10 * kBytes, 0.5);
  const CUdeviceptr host1 = MappedChunk({CU_MEM_LOCATION_TYPE_HOST_NUMA, 1}, 2);
  EXPECT_NEAR(CopyNs(local_[2], host1, 2), 10 + 50 + 10 * kBytes, 0.5);
}

TEST_F(NodeMemoryTest, HostMemoryOnTheOtherNodeCrossesTheSlowerInterSocketLink) {
  const CUdeviceptr host1 = MappedChunk({CU_MEM_LOCATION_TYPE_HOST_NUMA, 1}, 0);
  EXPECT_NEAR(CopyNs(local_[0], host1, 0), 10 + 50 + 20 * kBytes, 0.5);  // min(1e8, 5e7)
  EXPECT_NEAR(CopyNs(host1, local_[0], 0), 10 + 50 + 20 * kBytes, 0.5);
  const CUdeviceptr host0 = MappedChunk({CU_MEM_LOCATION_TYPE_HOST_NUMA, 0}, 2);
  EXPECT_NEAR(CopyNs(local_[2], host0, 2), 10 + 50 + 20 * kBytes, 0.5);
}

TEST_F(NodeMemoryTest, ConcurrentCrossingsShareTheInterSocketLink) {
  const CUdeviceptr host1 = MappedChunk({CU_MEM_LOCATION_TYPE_HOST_NUMA, 1}, 0);
  // Devices 0 and 1 each have their own host link, but both reads cross socket 1 -> 0: the
  // second starts while the first is in flight and gets half of the inter-socket link.
  CUevent a0, a1, b0, b1;
  for (CUevent* e : {&a0, &a1, &b0, &b1}) ASSERT_CU(cuEventCreate(e, 0));
  ASSERT_CU(cuCtxSetCurrent(ctx_of_[0]));
  ASSERT_CU(cuEventRecord(a0, stream_of_[0]));
  ASSERT_CU(cuMemcpyAsync(local_[0], host1, static_cast<size_t>(kBytes), stream_of_[0]));
  ASSERT_CU(cuEventRecord(a1, stream_of_[0]));
  ASSERT_CU(cuCtxSetCurrent(ctx_of_[1]));
  ASSERT_CU(cuEventRecord(b0, stream_of_[1]));
  ASSERT_CU(cuMemcpyAsync(local_[1], host1, static_cast<size_t>(kBytes), stream_of_[1]));
  ASSERT_CU(cuEventRecord(b1, stream_of_[1]));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuCtxSetCurrent(ctx_of_[0]));
  ASSERT_CU(cuCtxSynchronize());
  float ms = 0;
  ASSERT_CU(cuEventElapsedTime(&ms, a0, a1));
  EXPECT_NEAR(ms * 1e6, 10 + 50 + 20 * kBytes, 0.5);
  ASSERT_CU(cuEventElapsedTime(&ms, b0, b1));
  EXPECT_NEAR(ms * 1e6, 10 + 50 + 40 * kBytes, 0.5);
}

TEST_F(NodeMemoryTest, PinnedMemoryStaysOnTheAllocatingDevicesNode) {
  void* near0 = nullptr;
  void* near2 = nullptr;
  ASSERT_CU(cuCtxSetCurrent(ctx_of_[0]));
  ASSERT_CU(cuMemHostAlloc(&near0, kChunk, 0));
  ASSERT_CU(cuCtxSetCurrent(ctx_of_[2]));
  ASSERT_CU(cuMemHostAlloc(&near2, kChunk, 0));
  const auto p0 = reinterpret_cast<CUdeviceptr>(near0);
  const auto p2 = reinterpret_cast<CUdeviceptr>(near2);
  EXPECT_NEAR(CopyNs(local_[0], p0, 0), 10 + 50 + 10 * kBytes, 0.5);
  EXPECT_NEAR(CopyNs(local_[0], p2, 0), 10 + 50 + 20 * kBytes, 0.5);
  EXPECT_NEAR(CopyNs(local_[2], p2, 2), 10 + 50 + 10 * kBytes, 0.5);
}

TEST_F(NodeMemoryTest, AHostNumaIdTheMachineLacksIsInvalid) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 2};
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(cuMemCreate(&h, kChunk, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop.location.id = -1;
  EXPECT_EQ(cuMemCreate(&h, kChunk, &prop, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(NodeMemoryTest, APeerChunkIsChargedToItsDeviceAndCopiedOverThePeerLink) {
  const std::uint64_t live0 = Live(0), live1 = Live(1);
  const CUdeviceptr peer = MappedChunk({CU_MEM_LOCATION_TYPE_DEVICE, 1}, 0);
  EXPECT_EQ(Live(1), live1 + kChunk);
  EXPECT_EQ(Live(0), live0);
  size_t free1 = 0, total = 0;
  ASSERT_CU(cuCtxSetCurrent(ctx_of_[1]));
  ASSERT_CU(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, total - live1 - kChunk);
  // Device 0 reaches it at NVLink speed, both ways (2 ns a byte), and the bytes arrive.
  EXPECT_NEAR(CopyNs(peer, local_[0], 0), 10 + 50 + 2 * kBytes, 0.5);
  EXPECT_NEAR(CopyNs(local_[0], peer, 0), 10 + 50 + 2 * kBytes, 0.5);
  ASSERT_CU(cuCtxSetCurrent(ctx_of_[0]));
  const char text[] = "lent by device 1";
  ASSERT_CU(cuMemcpyHtoD(local_[0], text, sizeof text));
  ASSERT_CU(cuMemcpyDtoD(peer, local_[0], sizeof text));
  char back[sizeof text] = {};
  ASSERT_CU(cuMemcpyDtoH(back, peer, sizeof text));
  EXPECT_STREQ(back, text);
}

}  // namespace
}  // namespace simgpu_test
