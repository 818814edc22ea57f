// Virtual memory management: reserve / create / map / access / unmap / release, fd sharing.
#include <unistd.h>

#include <thread>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr size_t kPage = 2u << 20;

class VmmTest : public SimgpuTest {
 protected:
  void SetUp() override { Init(); }
  CUmemAllocationProp Prop(CUmemLocationType type = CU_MEM_LOCATION_TYPE_DEVICE, int id = 0) {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = id;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
  }
  void MapRw(CUdeviceptr va, CUmemGenericAllocationHandle h, size_t size) {
    ASSERT_CU(cuMemMap(va, size, 0, h, 0));
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = 0;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_CU(cuMemSetAccess(va, size, &desc, 1));
  }
  std::uint64_t Live() {
    std::uint64_t live = 0, peak = 0;
    simgpuGetPhysicalUsage(0, &live, &peak);
    return live;
  }
};

TEST_F(VmmTest, GranularityIsTwoMiBAndSizesMustMatchIt) {
  CUmemAllocationProp p = Prop();
  size_t g = 0;
  ASSERT_CU(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  EXPECT_EQ(g, kPage);
  CUmemGenericAllocationHandle h;
  EXPECT_EQ(cuMemCreate(&h, kPage + 1, &p, 0), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr va;
  EXPECT_EQ(cuMemAddressReserve(&va, 1000, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(VmmTest, MappedChunksHoldDataAndAreChargedUntilReleasedAndUnmapped) {
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, 2 * kPage, 0, 0, 0));
  EXPECT_EQ(va % kPage, 0u);
  CUmemAllocationProp p = Prop();
  CUmemGenericAllocationHandle h0, h1;
  ASSERT_CU(cuMemCreate(&h0, kPage, &p, 0));
  ASSERT_CU(cuMemCreate(&h1, kPage, &p, 0));
  EXPECT_EQ(Live(), 2 * kPage);
  MapRw(va, h0, kPage);
  MapRw(va + kPage, h1, kPage);
  ASSERT_CU(cuMemsetD32(va, 0x01020304u, 2 * kPage / 4));
  unsigned v = 0;
  ASSERT_CU(cuMemcpyDtoH(&v, va + kPage + 8, 4));
  EXPECT_EQ(v, 0x01020304u);
  ASSERT_CU(cuMemRelease(h1));
  EXPECT_EQ(Live(), 2 * kPage);  // still mapped
  ASSERT_CU(cuMemUnmap(va + kPage, kPage));
  EXPECT_EQ(Live(), kPage);
  int mapped = -1;
  ASSERT_CU(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va + kPage));
  EXPECT_EQ(mapped, 0);
  EXPECT_EQ(cuMemAddressFree(va, 2 * kPage), CUDA_ERROR_INVALID_VALUE);  // h0 still mapped
  ASSERT_CU(cuMemUnmap(va, kPage));
  ASSERT_CU(cuMemRelease(h0));
  EXPECT_EQ(Live(), 0u);
  EXPECT_EQ(cuMemRelease(h0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemAddressFree(va, 2 * kPage));
}

TEST_F(VmmTest, UnmapWaitsForQueuedWorkThatUsesTheRange) {
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, kPage, 0, 0, 0));
  CUmemAllocationProp p = Prop();
  CUmemGenericAllocationHandle h;
  ASSERT_CU(cuMemCreate(&h, kPage, &p, 0));
  MapRw(va, h, kPage);
  Gate* gate = NewPinnedGate();
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(LaunchBlock(gate, s));
  ASSERT_CU(LaunchTouch(va, s));  // queued behind the blocked kernel
  std::thread opener([gate] { gate->Open(); });
  ASSERT_CU(cuMemUnmap(va, kPage));  // must not return before the touch has run
  opener.join();
  EXPECT_CU(cuStreamSynchronize(s));  // had the touch run after the unmap, it would have faulted
  ASSERT_CU(cuMemRelease(h));
}

TEST_F(VmmTest, RemapAtSameAddressRestoresData) {
  // The swap pattern: copy out, unmap + release, later create + map again and copy back.
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, kPage, 0, 0, 0));
  CUmemAllocationProp p = Prop();
  CUmemGenericAllocationHandle h;
  ASSERT_CU(cuMemCreate(&h, kPage, &p, 0));
  MapRw(va, h, kPage);
  std::vector<char> data(kPage, 'x'), back(kPage);
  ASSERT_CU(cuMemcpyHtoD(va, data.data(), kPage));
  ASSERT_CU(cuMemcpyDtoH(back.data(), va, kPage));
  ASSERT_CU(cuMemUnmap(va, kPage));
  ASSERT_CU(cuMemRelease(h));
  ASSERT_CU(cuMemCreate(&h, kPage, &p, 0));
  MapRw(va, h, kPage);
  ASSERT_CU(cuMemcpyHtoD(va, back.data(), kPage));
  char c = 0;
  ASSERT_CU(cuMemcpyDtoH(&c, va + kPage - 1, 1));
  EXPECT_EQ(c, 'x');
}

TEST_F(VmmTest, CreateBeyondCapacityIsOutOfMemory) {
  // Default capacity is 80 GiB; ask for more than is left after a large allocation.
  CUdeviceptr big = 0;
  ASSERT_CU(cuMemAlloc(&big, 79ull << 30));
  CUmemAllocationProp p = Prop();
  CUmemGenericAllocationHandle h;
  EXPECT_EQ(cuMemCreate(&h, 2 * kPage * 512, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_CU(cuMemCreate(&h, kPage, &p, 0));
}

TEST_F(VmmTest, HostNumaChunksAreNotChargedToTheDevice) {
  CUmemAllocationProp p = Prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
  CUmemGenericAllocationHandle h;
  ASSERT_CU(cuMemCreate(&h, kPage, &p, 0));
  EXPECT_EQ(Live(), 0u);
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, kPage, 0, 0, 0));
  MapRw(va, h, kPage);
  unsigned memtype = 0;
  ASSERT_CU(cuPointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va));
  EXPECT_EQ(memtype, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
}

TEST_F(VmmTest, ExportedFdMapsTheSamePhysicalMemory) {
  CUmemAllocationProp p = Prop();
  CUmemGenericAllocationHandle h;
  ASSERT_CU(cuMemCreate(&h, kPage, &p, 0));
  int fd = -1;
  ASSERT_CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  ASSERT_GE(fd, 0);
  CUmemGenericAllocationHandle imported;
  ASSERT_CU(cuMemImportFromShareableHandle(&imported,
                                           reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  CUdeviceptr va1 = 0, va2 = 0;
  ASSERT_CU(cuMemAddressReserve(&va1, kPage, 0, 0, 0));
  ASSERT_CU(cuMemAddressReserve(&va2, kPage, 0, 0, 0));
  MapRw(va1, h, kPage);
  MapRw(va2, imported, kPage);
  ASSERT_CU(cuMemsetD8(va1 + 123, 0x42, 1));
  unsigned char v = 0;
  ASSERT_CU(cuMemcpyDtoH(&v, va2 + 123, 1));
  EXPECT_EQ(v, 0x42);
  EXPECT_EQ(Live(), kPage);  // the import is not charged twice
  CUmemAllocationProp got{};
  ASSERT_CU(cuMemGetAllocationPropertiesFromHandle(&got, imported));
  EXPECT_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(got.location.id, 0);
}

TEST_F(VmmTest, MapRejectsOverlapsAndRangesOutsideReservations) {
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, kPage, 0, 0, 0));
  CUmemAllocationProp p = Prop();
  CUmemGenericAllocationHandle h;
  ASSERT_CU(cuMemCreate(&h, kPage, &p, 0));
  ASSERT_CU(cuMemMap(va, kPage, 0, h, 0));
  EXPECT_EQ(cuMemMap(va, kPage, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemMap(va + kPage, kPage, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemMap(va, kPage, 0, 0xdead0000ull, 0), CUDA_ERROR_INVALID_HANDLE);
}

}  // namespace
}  // namespace simgpu_test
