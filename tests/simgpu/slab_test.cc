// Chunks created without shareable handle types come from one slab memfd per location
// (simgpu/src/slab.h): many more chunks than RLIMIT_NOFILE allows, adjacent mappings merge, and
// released ranges are punched out of the file.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr size_t kChunk = 2u << 20;
constexpr int kChunks = 1000;

CUmemAllocationProp DeviceProp() {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  return p;
}

// The device-0 slab memfd as this process sees it, or -1.
int OpenSlab() {
  for (int fd = 0; fd < 4096; ++fd) {
    char path[64], target[128] = {};
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (readlink(path, target, sizeof target - 1) <= 0) continue;
    if (std::strncmp(target, "/memfd:simgpu-slab-dev0", 23) == 0) return open(path, O_RDONLY);
  }
  return -1;
}

std::uint64_t AllocatedBytes(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

// Mappings of the slab in /proc/self/maps: one per VMA.
int SlabVmas() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("simgpu-slab-dev0") != std::string::npos) ++n;
  return n;
}

class SlabTest : public SimgpuTest {
 protected:
  void SetUp() override { Init(); }
};

TEST_F(SlabTest, MoreChunksThanDescriptorsMapMergeAndArePunchedOnRelease) {
  // cuInit raised the soft limit; a limit far below the chunk count proves chunks take no fd each.
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  lim.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);

  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, kChunks * kChunk, 0, 0, 0));
  const CUmemAllocationProp prop = DeviceProp();
  std::vector<CUmemGenericAllocationHandle> h(kChunks);
  for (int i = 0; i < kChunks; ++i) {
    ASSERT_CU(cuMemCreate(&h[i], kChunk, &prop, 0));
    ASSERT_CU(cuMemMap(va + i * kChunk, kChunk, 0, h[i], 0));
  }
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = 0;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_CU(cuMemSetAccess(va, kChunks * kChunk, &desc, 1));
  std::uint64_t live = 0, peak = 0;
  simgpuGetPhysicalUsage(0, &live, &peak);
  EXPECT_EQ(live, std::uint64_t{kChunks} * kChunk);  // charging is per chunk, as before

  // Consecutive chunks sit at consecutive slab offsets, so their mappings merge.
  EXPECT_LE(SlabVmas(), 2);

  for (int i = 0; i < kChunks; ++i) {
    auto* p = reinterpret_cast<int*>(va + i * kChunk);
    p[0] = i;
    p[kChunk / sizeof(int) - 1] = -i;
  }
  for (int i = 0; i < kChunks; ++i) {
    auto* p = reinterpret_cast<int*>(va + i * kChunk);
    ASSERT_EQ(p[0], i);
    ASSERT_EQ(p[kChunk / sizeof(int) - 1], -i);
  }

  const int slab = OpenSlab();
  ASSERT_GE(slab, 0);
  EXPECT_GE(AllocatedBytes(slab), std::uint64_t{2} * kChunks * 4096);  // two written pages each

  int fd = -1;
  EXPECT_EQ(cuMemExportToShareableHandle(&fd, h[0], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_NOT_PERMITTED);

  ASSERT_CU(cuMemUnmap(va, kChunks * kChunk));
  for (int i = 0; i < kChunks; ++i) ASSERT_CU(cuMemRelease(h[i]));
  EXPECT_EQ(AllocatedBytes(slab), 0u);  // released ranges were punched out
  simgpuGetPhysicalUsage(0, &live, &peak);
  EXPECT_EQ(live, 0u);

  // Freed offsets are reused and read back as zeros.
  CUmemGenericAllocationHandle again = 0;
  ASSERT_CU(cuMemCreate(&again, kChunk, &prop, 0));
  ASSERT_CU(cuMemMap(va, kChunk, 0, again, 0));
  ASSERT_CU(cuMemSetAccess(va, kChunk, &desc, 1));
  EXPECT_EQ(reinterpret_cast<int*>(va)[0], 0);
  ASSERT_CU(cuMemUnmap(va, kChunk));
  ASSERT_CU(cuMemRelease(again));
  ASSERT_CU(cuMemAddressFree(va, kChunks * kChunk));
  close(slab);
}

TEST_F(SlabTest, ReleaseWhileMappedKeepsMemoryUntilUnmap) {
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, 2 * kChunk, 0, 0, 0));
  const CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle a = 0, b = 0;
  ASSERT_CU(cuMemCreate(&a, kChunk, &prop, 0));
  ASSERT_CU(cuMemCreate(&b, kChunk, &prop, 0));
  ASSERT_CU(cuMemMap(va, kChunk, 0, a, 0));
  ASSERT_CU(cuMemMap(va + kChunk, kChunk, 0, b, 0));
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_CU(cuMemSetAccess(va, 2 * kChunk, &desc, 1));
  reinterpret_cast<int*>(va)[0] = 7;
  reinterpret_cast<int*>(va + kChunk)[0] = 8;
  ASSERT_CU(cuMemRelease(a));  // still mapped: the memory stays
  EXPECT_EQ(reinterpret_cast<int*>(va)[0], 7);
  EXPECT_EQ(reinterpret_cast<int*>(va + kChunk)[0], 8);  // the neighbour is untouched
  ASSERT_CU(cuMemUnmap(va, kChunk));
  EXPECT_EQ(reinterpret_cast<int*>(va + kChunk)[0], 8);  // punching a did not reach b
  ASSERT_CU(cuMemUnmap(va + kChunk, kChunk));
  ASSERT_CU(cuMemRelease(b));
  ASSERT_CU(cuMemAddressFree(va, 2 * kChunk));
}

}  // namespace
}  // namespace simgpu_test
