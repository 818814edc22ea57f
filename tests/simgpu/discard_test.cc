// simgpuMemDiscardAsync (docs/simgpu.md, "simgpu control entry points"): a discarded range reads
// back as zeros, its host pages are released (mincore), it runs in stream order, costs no
// virtual time, and is refused for memory simgpu does not own and on a capturing stream.
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr std::size_t kMiB = 1u << 20;
constexpr std::size_t kChunk = 2 * kMiB;

/// Pages of [p, p + n) resident in this process (mincore). Never read the range directly before
/// counting: a read of a memfd hole through the mapping would commit a page.
std::size_t ResidentPages(std::uintptr_t p, std::size_t n) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = p / page * page;
  const std::size_t pages = (p + n - first + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  if (mincore(reinterpret_cast<void*>(first), pages * page, vec.data()) != 0) return SIZE_MAX;
  std::size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

std::size_t PagesOf(std::size_t n) { return n / static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

/// Number of bytes of device range [p, p + n) that differ from `want` (read with a D2H copy,
/// which reads only written extents and so commits nothing).
std::size_t CountNot(CUdeviceptr p, std::size_t n, unsigned char want) {
  std::vector<unsigned char> back(n, static_cast<unsigned char>(want ^ 0xFF));
  if (cuMemcpyDtoH(back.data(), p, n) != CUDA_SUCCESS) return SIZE_MAX;
  std::size_t bad = 0;
  for (unsigned char b : back) bad += b != want;
  return bad;
}

class DiscardTest : public SimgpuTest {
 protected:
  /// A range of `chunks` 2 MiB chunks carved from the device slab, as the shim's pool makes them.
  CUdeviceptr MapChunks(int chunks) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUdeviceptr va = 0;
    EXPECT_CU(cuMemAddressReserve(&va, chunks * kChunk, 0, 0, 0));
    for (int i = 0; i < chunks; ++i) {
      CUmemGenericAllocationHandle h = 0;
      EXPECT_CU(cuMemCreate(&h, kChunk, &prop, 0));
      EXPECT_CU(cuMemMap(va + i * kChunk, kChunk, 0, h, 0));
    }
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    EXPECT_CU(cuMemSetAccess(va, chunks * kChunk, &desc, 1));
    return va;
  }
};

TEST_F(DiscardTest, ShouldZeroAVmmRangeAndReleaseItsPagesWithoutVirtualTime) {
  Init();
  const CUdeviceptr va = MapChunks(4);
  const std::size_t n = 4 * kChunk;
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuMemsetD8Async(va, 0x5A, n, s));
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_EQ(ResidentPages(va, n), PagesOf(n));
  std::uint64_t stream_before = 0, stream_after = 0;
  ASSERT_EQ(simgpuStreamVirtualNs(s, &stream_before), CUDA_SUCCESS);
  const std::uint64_t host_before = simgpuHostVirtualNs();
  // The middle two chunks only: the outer ones keep their bytes.
  ASSERT_EQ(simgpuMemDiscardAsync(va + kChunk, 2 * kChunk, s), CUDA_SUCCESS);
  EXPECT_EQ(simgpuHostVirtualNs(), host_before);  // no host-clock tick
  ASSERT_EQ(simgpuStreamVirtualNs(s, &stream_after), CUDA_SUCCESS);
  EXPECT_EQ(stream_after, stream_before);  // no stream time
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(ResidentPages(va + kChunk, 2 * kChunk), 0u);
  EXPECT_EQ(ResidentPages(va, kChunk), PagesOf(kChunk));
  EXPECT_EQ(ResidentPages(va + 3 * kChunk, kChunk), PagesOf(kChunk));
  EXPECT_EQ(CountNot(va + kChunk, 2 * kChunk, 0), 0u);
  EXPECT_EQ(CountNot(va, kChunk, 0x5A), 0u);
  EXPECT_EQ(CountNot(va + 3 * kChunk, kChunk, 0x5A), 0u);
  EXPECT_EQ(simgpuGetCallCount("simgpuMemDiscardAsync"), 1u);
}

// A range written in a page or two per chunk (a model-shaped trainer's sampled words) has them
// zeroed in place: the pages stay (no hole punch, no TLB shoot-down), the bytes read zeros.
TEST_F(DiscardTest, ShouldZeroASparselyWrittenRangeInPlaceKeepingItsPages) {
  Init();
  const CUdeviceptr va = MapChunks(4);
  const std::size_t n = 4 * kChunk;
  const std::size_t offset = 397 * 4096 + 100;  // one word inside page 397 of each chunk
  for (int i = 0; i < 4; ++i) ASSERT_CU(cuMemsetD8(va + i * kChunk + offset, 0x77, 8));
  // One chunk written densely after all: more than 1/64 of the range, so everything is dropped.
  const CUdeviceptr dense = MapChunks(2);
  ASSERT_CU(cuMemsetD8(dense, 0x66, kChunk));
  ASSERT_CU(cuCtxSynchronize());  // the memsets are asynchronous to the host
  ASSERT_EQ(ResidentPages(va, n), 4u);
  ASSERT_EQ(ResidentPages(dense, 2 * kChunk), PagesOf(kChunk));
  ASSERT_EQ(simgpuMemDiscardAsync(va, n, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(simgpuMemDiscardAsync(dense, 2 * kChunk, nullptr), CUDA_SUCCESS);
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(CountNot(va, n, 0), 0u);
  EXPECT_EQ(ResidentPages(va, n), 4u);  // zeroed in place
  EXPECT_EQ(CountNot(dense, 2 * kChunk, 0), 0u);
  EXPECT_EQ(ResidentPages(dense, 2 * kChunk), 0u);  // dropped
}

TEST_F(DiscardTest, ShouldZeroPlainAndPinnedMemoryKeepingPartialEdgePagesOutsideTheRange) {
  Init();
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t n = 4 * kMiB;
  CUdeviceptr dev = 0;
  ASSERT_CU(cuMemAlloc(&dev, n));
  ASSERT_CU(cuMemsetD8(dev, 0x33, n));
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, n, 0));
  std::memset(pinned, 0x44, n);
  const auto host = reinterpret_cast<CUdeviceptr>(pinned);
  // Unaligned ends: the partial pages are zeroed in place, the whole pages dropped.
  ASSERT_EQ(simgpuMemDiscardAsync(dev + 100, n - 200, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(simgpuMemDiscardAsync(host, n, nullptr), CUDA_SUCCESS);
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(ResidentPages(dev + page, n - 2 * page), 0u);
  EXPECT_EQ(ResidentPages(host, n), 0u);
  EXPECT_EQ(CountNot(dev, 100, 0x33), 0u);
  EXPECT_EQ(CountNot(dev + 100, n - 200, 0), 0u);
  EXPECT_EQ(CountNot(dev + n - 100, 100, 0x33), 0u);
  EXPECT_EQ(CountNot(host, n, 0), 0u);
}

TEST_F(DiscardTest, ShouldRunInStreamOrderAfterWorkQueuedBeforeIt) {
  Init();
  const CUdeviceptr va = MapChunks(1);
  ASSERT_CU(cuMemsetD8(va, 0x21, kChunk));
  ASSERT_CU(cuCtxSynchronize());
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Gate* gate = NewPinnedGate();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(LaunchBlock(gate, s));
  ASSERT_EQ(simgpuMemDiscardAsync(va, kChunk, s), CUDA_SUCCESS);
  ASSERT_CU(cuMemsetD8Async(va, 0x22, 4096, s));  // after the discard: survives it
  // The stream is held before the discard: the chunk still holds every byte.
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(ResidentPages(va, kChunk), PagesOf(kChunk));
  gate->Open();
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(CountNot(va, 4096, 0x22), 0u);
  EXPECT_EQ(CountNot(va + 4096, kChunk - 4096, 0), 0u);
  EXPECT_EQ(ResidentPages(va, kChunk), 1u);
}

TEST_F(DiscardTest, ShouldRefuseForeignMemoryAndCapturingStreamsLeavingBytesIntact) {
  Init();
  std::vector<unsigned char> pageable(kMiB, 7);
  EXPECT_EQ(simgpuMemDiscardAsync(reinterpret_cast<CUdeviceptr>(pageable.data()), kMiB, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(pageable[12345], 7);
  CUdeviceptr dev = 0;
  ASSERT_CU(cuMemAlloc(&dev, kMiB));
  ASSERT_CU(cuMemsetD8(dev, 0x66, kMiB));
  EXPECT_EQ(simgpuMemDiscardAsync(dev, 2 * kMiB, nullptr), CUDA_ERROR_INVALID_VALUE);  // past end
  EXPECT_EQ(simgpuMemDiscardAsync(0, kMiB, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(simgpuMemDiscardAsync(dev, kMiB, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(s, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  ASSERT_CU(cuGraphLaunch(exec, s));  // an empty graph: nothing was recorded
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(CountNot(dev, kMiB, 0x66), 0u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(dev));
}

}  // namespace
}  // namespace simgpu_test
