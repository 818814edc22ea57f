// Stream-ordered reuse in memory pools: a cuMemFreeAsync still pending on a stream is reusable at
// once by later allocations on that stream, by other streams only once it has executed, and the
// physical high-water mark follows the workload's live peak however far the host runs ahead.
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr std::uint64_t kMiB = 1u << 20;

std::uint64_t PhysicalLive() {
  std::uint64_t live = 0, peak = 0;
  EXPECT_EQ(simgpuGetPhysicalUsage(0, &live, &peak), 0);
  return live;
}

std::uint64_t PhysicalPeak() {
  std::uint64_t live = 0, peak = 0;
  EXPECT_EQ(simgpuGetPhysicalUsage(0, &live, &peak), 0);
  return peak;
}

/// A fixture whose stream `s_` is stuck behind a blocked kernel until the test opens `gate_`, so
/// every free queued on it is still pending (cuStreamQuery proves it).
class PoolReuseTest : public SimgpuTest {
 protected:
  void InitBlocked() {
    Init();
    gate_ = NewPinnedGate();
    ASSERT_NE(gate_, nullptr);
    ASSERT_CU(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(cuStreamCreate(&t_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(LaunchBlock(gate_, s_));
  }
  void Release() {
    EXPECT_EQ(cuStreamQuery(s_), CUDA_ERROR_NOT_READY);  // nothing behind the gate has run
    gate_->Open();
    EXPECT_CU(cuStreamSynchronize(s_));
  }
  Gate* gate_ = nullptr;
  CUstream s_ = nullptr;
  CUstream t_ = nullptr;
};

TEST_F(PoolReuseTest, SameStreamAllocationTakesOverAPendingFree) {
  InitBlocked();
  const std::uint64_t live0 = PhysicalLive();
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAllocAsync(&a, 4 * kMiB, s_));
  ASSERT_CU(cuMemFreeAsync(a, s_));
  ASSERT_CU(cuMemAllocAsync(&b, 4 * kMiB, s_));
  EXPECT_EQ(PhysicalLive(), live0 + 4 * kMiB);
  EXPECT_EQ(PhysicalPeak(), live0 + 4 * kMiB);
  Release();
  EXPECT_EQ(PhysicalLive(), live0 + 4 * kMiB);  // the free's bytes now belong to b
  ASSERT_CU(cuMemFreeAsync(b, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(PhysicalLive(), live0);
}

TEST_F(PoolReuseTest, ReuseKeepsStreamOrderOfTheDataItself) {
  InitBlocked();
  void* host = nullptr;
  ASSERT_CU(cuMemAllocHost(&host, 2 * kMiB));
  auto* out = static_cast<unsigned char*>(host);
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAllocAsync(&a, kMiB, s_));
  ASSERT_CU(cuMemsetD8Async(a, 0x11, kMiB, s_));
  ASSERT_CU(cuMemcpyDtoHAsync(out, a, kMiB, s_));  // queued before the free: must see 0x11
  ASSERT_CU(cuMemFreeAsync(a, s_));
  ASSERT_CU(cuMemAllocAsync(&b, kMiB, s_));
  ASSERT_CU(cuMemsetD8Async(b, 0x22, kMiB, s_));
  ASSERT_CU(cuMemcpyDtoHAsync(out + kMiB, b, kMiB, s_));
  Release();
  std::vector<unsigned char> first(kMiB, 0x11), second(kMiB, 0x22);
  EXPECT_EQ(std::memcmp(out, first.data(), kMiB), 0);
  EXPECT_EQ(std::memcmp(out + kMiB, second.data(), kMiB), 0);
  ASSERT_CU(cuMemFreeAsync(b, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
}

TEST_F(PoolReuseTest, OtherStreamReusesOnlyAfterTheFreeExecuted) {
  InitBlocked();
  const std::uint64_t live0 = PhysicalLive();
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_CU(cuMemAllocAsync(&a, 4 * kMiB, s_));
  ASSERT_CU(cuMemFreeAsync(a, s_));
  ASSERT_CU(cuMemAllocAsync(&b, 4 * kMiB, t_));  // a's free has not run: fresh memory
  EXPECT_EQ(PhysicalLive(), live0 + 8 * kMiB);
  Release();
  EXPECT_EQ(PhysicalLive(), live0 + 4 * kMiB);
  ASSERT_CU(cuMemAllocAsync(&c, 4 * kMiB, t_));  // a's bytes are free for anyone now
  EXPECT_EQ(PhysicalLive(), live0 + 8 * kMiB);
  EXPECT_EQ(PhysicalPeak(), live0 + 8 * kMiB);
  ASSERT_CU(cuMemFreeAsync(b, t_));
  ASSERT_CU(cuMemFreeAsync(c, t_));
  ASSERT_CU(cuStreamSynchronize(t_));
  EXPECT_EQ(PhysicalLive(), live0);
}

TEST_F(PoolReuseTest, PoolUsageCountsTakenOverBytesOnce) {
  InitBlocked();
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  ASSERT_CU(cuMemPoolCreate(&pool, &props));
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&a, 2 * kMiB, pool, s_));
  ASSERT_CU(cuMemFreeAsync(a, s_));
  // A default-pool free on the same stream is not reusable by this pool.
  ASSERT_CU(cuMemAllocAsync(&c, 2 * kMiB, s_));
  ASSERT_CU(cuMemFreeAsync(c, s_));
  ASSERT_CU(cuMemAllocFromPoolAsync(&b, 3 * kMiB, pool, s_));  // 2 MiB taken over, 1 MiB new
  cuuint64_t used = 0;
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 3 * kMiB);
  EXPECT_EQ(PhysicalLive(), 5 * kMiB);  // b, plus c's free still pending
  Release();
  EXPECT_EQ(PhysicalLive(), 3 * kMiB);
  ASSERT_CU(cuMemFreeAsync(b, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(PhysicalLive(), 0u);
}

TEST_F(PoolReuseTest, CapacityAtTheLivePeakSufficesWhileFreesArePending) {
  setenv("SIMGPU_MEMORY", "8MiB", 1);
  InitBlocked();
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_CU(cuMemAllocAsync(&a, 6 * kMiB, s_));
  ASSERT_CU(cuMemFreeAsync(a, s_));
  ASSERT_CU(cuMemAllocAsync(&b, 6 * kMiB, s_));  // no wait needed: the gate is still closed
  // Nothing left to reuse on s_, no frees pending elsewhere: a genuine out of memory.
  EXPECT_EQ(cuMemAllocAsync(&c, 4 * kMiB, s_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAllocAsync(&c, 4 * kMiB, t_), CUDA_ERROR_OUT_OF_MEMORY);
  Release();
  EXPECT_EQ(PhysicalPeak(), 6 * kMiB);
}

TEST_F(PoolReuseTest, OtherStreamWaitsForPendingFreesBeforeOutOfMemory) {
  setenv("SIMGPU_MEMORY", "8MiB", 1);
  InitBlocked();
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAllocAsync(&a, 6 * kMiB, s_));
  ASSERT_CU(cuMemFreeAsync(a, s_));
  // Whether the gate opens before or while t_'s allocation waits, the allocation must succeed:
  // it may only fail if it gave up without waiting for s_'s free.
  std::thread opener([gate = gate_] { gate->Open(); });
  EXPECT_CU(cuMemAllocAsync(&b, 6 * kMiB, t_));
  opener.join();
  EXPECT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(PhysicalPeak(), 6 * kMiB);
}

// A trainer-like loop: allocations of varying sizes, frees in varying order, all on one stream
// whose worker has executed none of them. The physical peak must equal the live peak.
TEST_F(PoolReuseTest, PhysicalPeakFollowsTheLivePeakOfAStreamOrderedWorkload) {
  InitBlocked();
  ASSERT_EQ(PhysicalPeak(), 0u);
  std::uint32_t rng = 12345;
  auto next = [&rng] {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
  };
  struct Block {
    CUdeviceptr ptr;
    std::uint64_t charged;
  };
  std::vector<Block> live;
  std::uint64_t live_bytes = 0, live_peak = 0;
  for (int i = 0; i < 600; ++i) {
    const bool grow = live.empty() || next() % 100 < (i % 200 < 100 ? 70u : 35u);
    if (grow) {
      const std::size_t bytes = 1 + next() % (3 * kMiB);
      CUdeviceptr p = 0;
      ASSERT_CU(cuMemAllocAsync(&p, bytes, s_));
      live.push_back({p, (bytes + 511) / 512 * 512});
      live_bytes += live.back().charged;
      live_peak = std::max(live_peak, live_bytes);
    } else {
      const std::size_t k = next() % live.size();
      ASSERT_CU(cuMemFreeAsync(live[k].ptr, s_));
      live_bytes -= live[k].charged;
      live[k] = live.back();
      live.pop_back();
    }
  }
  ASSERT_GT(live_peak, 20 * kMiB);
  EXPECT_EQ(PhysicalPeak(), live_peak);
  Release();
  EXPECT_EQ(PhysicalLive(), live_bytes);
  for (auto& b : live) ASSERT_CU(cuMemFreeAsync(b.ptr, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(PhysicalLive(), 0u);
  EXPECT_EQ(PhysicalPeak(), live_peak);
}

}  // namespace
}  // namespace simgpu_test
