// Allocation, capacity, copies, memsets, pinned host memory and pools.
#include <cstring>
#include <numeric>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

class MemoryTest : public SimgpuTest {};

TEST_F(MemoryTest, ExceedingCapacityIsOutOfMemoryAndPeakIsTracked) {
  setenv("SIMGPU_MEMORY", "64MiB", 1);
  Init();
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc(&a, 48u << 20));
  EXPECT_EQ(cuMemAlloc(&b, 32u << 20), CUDA_ERROR_OUT_OF_MEMORY);
  size_t free_bytes = 0, total = 0;
  ASSERT_CU(cuMemGetInfo(&free_bytes, &total));
  EXPECT_EQ(total, 64u << 20);
  EXPECT_EQ(free_bytes, 16u << 20);
  ASSERT_CU(cuMemFree(a));
  ASSERT_CU(cuMemAlloc(&b, 32u << 20));
  std::uint64_t live = 0, peak = 0;
  ASSERT_EQ(simgpuGetPhysicalUsage(0, &live, &peak), 0);
  EXPECT_EQ(live, 32u << 20);
  EXPECT_EQ(peak, 48u << 20);
  EXPECT_EQ(simgpuGetPhysicalUsage(1, &live, &peak), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(MemoryTest, SmallAllocationsAreChargedIn512ByteUnits) {
  Init();
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 1));
  std::uint64_t live = 0, peak = 0;
  ASSERT_EQ(simgpuGetPhysicalUsage(0, &live, &peak), 0);
  EXPECT_EQ(live, 512u);
  EXPECT_EQ(p % 512, 0u);
  EXPECT_EQ(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(12345), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MemoryTest, LargeCapacityIsCommittedLazily) {
  Init();  // default 80 GiB on a machine with much less RAM
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 40ull << 30));
  ASSERT_CU(cuMemsetD8(p + (20ull << 30), 7, 4096));
  unsigned char v = 0;
  ASSERT_CU(cuMemcpyDtoH(&v, p + (20ull << 30) + 100, 1));
  EXPECT_EQ(v, 7);
  ASSERT_CU(cuMemFree(p));
}

TEST_F(MemoryTest, CopiesAndMemsetsRoundTrip) {
  Init();
  std::vector<unsigned> src(1024);
  std::iota(src.begin(), src.end(), 1u);
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc(&a, 4096));
  ASSERT_CU(cuMemAlloc(&b, 4096));
  ASSERT_CU(cuMemcpyHtoD(a, src.data(), 4096));
  ASSERT_CU(cuMemcpyDtoD(b, a, 4096));
  ASSERT_CU(cuMemsetD32(b + 4, 0xabcdef01u, 2));
  ASSERT_CU(cuMemsetD8(b + 4000, 0x5a, 4));
  std::vector<unsigned> out(1024);
  ASSERT_CU(cuMemcpyDtoH(out.data(), b, 4096));
  EXPECT_EQ(out[0], 1u);
  EXPECT_EQ(out[1], 0xabcdef01u);
  EXPECT_EQ(out[2], 0xabcdef01u);
  EXPECT_EQ(out[3], 4u);
  EXPECT_EQ(out[1000], 0x5a5a5a5au);
  EXPECT_EQ(cuMemsetD32(b + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);  // misaligned
}

TEST_F(MemoryTest, AsyncCopiesWithPinnedMemory) {
  Init();
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* pinned = nullptr;
  ASSERT_CU(cuMemAllocHost(&pinned, 256));
  std::memset(pinned, 9, 256);
  CUdeviceptr d = 0;
  ASSERT_CU(cuMemAllocAsync(&d, 256, s));
  ASSERT_CU(cuMemcpyHtoDAsync(d, pinned, 256, s));
  ASSERT_CU(cuMemsetD8Async(d, 3, 16, s));
  ASSERT_CU(cuMemcpyDtoHAsync(pinned, d, 256, s));
  ASSERT_CU(cuMemFreeAsync(d, s));
  ASSERT_CU(cuStreamSynchronize(s));
  auto* bytes = static_cast<unsigned char*>(pinned);
  EXPECT_EQ(bytes[0], 3);
  EXPECT_EQ(bytes[16], 9);
  ASSERT_CU(cuMemFreeHost(pinned));
  int local = 0;
  EXPECT_EQ(cuMemFreeHost(&local), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MemoryTest, RegisteredHostMemoryIsLegalForKernelsUntilUnregistered) {
  Init();
  std::vector<char> host(8192, 0);
  ASSERT_CU(cuMemHostRegister(host.data(), host.size(), 0));
  EXPECT_EQ(cuMemHostRegister(host.data(), host.size(), 0),
            CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  ASSERT_CU(LaunchTouch(reinterpret_cast<CUdeviceptr>(host.data()), nullptr));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(host[0], 1);
  ASSERT_CU(cuMemHostUnregister(host.data()));
  EXPECT_EQ(cuMemHostUnregister(host.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  host[0] = 0;
  // Now it is ordinary host memory again: the launch is refused on the device, nothing runs.
  ASSERT_CU(LaunchTouch(reinterpret_cast<CUdeviceptr>(host.data()), nullptr));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(host[0], 0);
}

TEST_F(MemoryTest, PitchIsAlignedRows) {
  Init();
  CUdeviceptr p = 0;
  size_t pitch = 0;
  ASSERT_CU(cuMemAllocPitch(&p, &pitch, 1000, 10, 4));
  EXPECT_EQ(pitch, 1024u);
  std::uint64_t live = 0, peak = 0;
  ASSERT_EQ(simgpuGetPhysicalUsage(0, &live, &peak), 0);
  EXPECT_EQ(live, 10240u);
  EXPECT_EQ(cuMemAllocPitch(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MemoryTest, PoolAllocationsAreCountedByThePool) {
  Init();
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  ASSERT_CU(cuMemPoolCreate(&pool, &props));
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&p, 1 << 20, pool, s));
  cuuint64_t used = 0;
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 1u << 20);
  ASSERT_CU(cuMemFreeAsync(p, s));
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 0u);
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &used));
  EXPECT_EQ(used, 1u << 20);
  EXPECT_CU(cuMemPoolDestroy(pool));
}

TEST_F(MemoryTest, AsyncAllocationWaitsForPendingFreesBeforeOutOfMemory) {
  setenv("SIMGPU_MEMORY", "8MiB", 1);
  Init();
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAllocAsync(&a, 6u << 20, s));
  ASSERT_CU(cuMemFreeAsync(a, s));
  ASSERT_CU(cuMemAllocAsync(&b, 6u << 20, s));  // fits once the queued free has run
  CUdeviceptr c = 0;
  EXPECT_EQ(cuMemAllocAsync(&c, 6u << 20, s), CUDA_ERROR_OUT_OF_MEMORY);
}

TEST_F(MemoryTest, PeerCopyBetweenDevices) {
  setenv("SIMGPU_DEVICES", "2", 1);
  Init();
  CUdeviceptr a = 0;
  ASSERT_CU(cuMemAlloc(&a, 1024));
  CUcontext ctx1;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
  ASSERT_CU(cuCtxSetCurrent(ctx1));
  CUdeviceptr b = 0;
  ASSERT_CU(cuMemAlloc(&b, 1024));
  ASSERT_CU(cuMemsetD8(b, 0x11, 1024));
  ASSERT_CU(cuCtxEnablePeerAccess(ctx_, 0));
  ASSERT_CU(cuMemcpyPeer(a, ctx_, b, ctx1, 1024));
  unsigned char v = 0;
  ASSERT_CU(cuMemcpyDtoH(&v, a + 1023, 1));
  EXPECT_EQ(v, 0x11);
  CUdevice d = -1;
  ASSERT_CU(cuPointerGetAttribute(&d, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b));
  EXPECT_EQ(d, 1);
  std::uint64_t live = 0, peak = 0;
  ASSERT_EQ(simgpuGetPhysicalUsage(1, &live, &peak), 0);
  EXPECT_EQ(live, 1024u);
}

}  // namespace
}  // namespace simgpu_test
