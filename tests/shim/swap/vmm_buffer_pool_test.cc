// VmmBufferPool on simgpu, at a host NUMA node (one device suffices; the peer-GPU location is in
// placement_test.cc): buffers reused by exact span with no driver call, the caller's limit
// honoured (idle buffers of other spans freed to meet it, nothing handed out beyond it), an idle
// buffer whose copy still runs kept by a trim without waits, and a refused cuMemCreate not
// retried until Unblock.
#include <memory>

#include "parts_fixture.h"
#include "swap/vmm_buffer_pool.h"

namespace swap_test {
namespace {

class VmmBufferPoolTest : public PartsFixture {
 protected:
  void Start(CUmemLocationType type = CU_MEM_LOCATION_TYPE_HOST_NUMA, int id = 0) {
    StartParts();
    CUmemLocation location = {};
    location.type = type;
    location.id = id;
    pool_ = std::make_unique<sw::VmmBufferPool>(base_, location, /*accessor=*/0);
  }
  void TearDown() override {
    pool_.reset();  // before the fence pool it refers to
    PartsFixture::TearDown();
  }
  CUdeviceptr Take(std::size_t span, std::uint64_t limit) {
    sw::Fence* fence = nullptr;
    const CUdeviceptr va = pool_->Acquire(span, limit, &fence);
    fences_->Unref(fence);
    return va;
  }
  std::unique_ptr<sw::VmmBufferPool> pool_;
};

TEST_F(VmmBufferPoolTest, AnIdleBufferOfTheSameSpanIsReusedWithoutADriverCall) {
  Start();
  const CUdeviceptr a = Take(4 * kMiB, 16 * kMiB);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(pool_->held_bytes(), 4 * kMiB);
  pool_->Release(a, 4 * kMiB, nullptr);
  const std::uint64_t creates = Calls("cuMemCreate");
  EXPECT_EQ(Take(4 * kMiB, 16 * kMiB), a);
  EXPECT_EQ(Calls("cuMemCreate"), creates);
  EXPECT_EQ(pool_->creates(), 1u);
  // The buffer is device memory to our device: a kernel fills it and a copy reads it back.
  ASSERT_CU(Fill(a, 4 * kMiB, 21, compute_));
  EXPECT_EQ(Mismatches(a, 4 * kMiB, 21), 0u);
  pool_->Release(a, 4 * kMiB, nullptr);
}

TEST_F(VmmBufferPoolTest, TheLimitIsMetByFreeingIdleBuffersOfOtherSpans) {
  Start();
  const CUdeviceptr a = Take(4 * kMiB, 8 * kMiB), b = Take(4 * kMiB, 8 * kMiB);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(Take(2 * kMiB, 8 * kMiB), 0u);  // both in use: no room
  pool_->Release(b, 4 * kMiB, nullptr);
  const CUdeviceptr c = Take(2 * kMiB, 8 * kMiB);  // b's idle 4 MiB go to make room
  ASSERT_NE(c, 0u);
  EXPECT_EQ(pool_->held_bytes(), 6 * kMiB);
  pool_->Release(a, 4 * kMiB, nullptr);
  pool_->Release(c, 2 * kMiB, nullptr);
}

TEST_F(VmmBufferPoolTest, NothingIsHandedOutBeyondTheLimitNotEvenAnIdleBuffer) {
  Start();
  const CUdeviceptr a = Take(4 * kMiB, 8 * kMiB);
  ASSERT_NE(a, 0u);
  pool_->Release(a, 4 * kMiB, nullptr);
  EXPECT_EQ(Take(4 * kMiB, 2 * kMiB), 0u);  // a shrunk lease
  EXPECT_EQ(pool_->Trim(2 * kMiB, /*wait=*/false), 4 * kMiB);
  EXPECT_EQ(pool_->held_bytes(), 0u);
}

TEST_F(VmmBufferPoolTest, ATrimWithoutWaitsKeepsABufferWhoseCopyStillRuns) {
  Start();
  const CUdeviceptr a = Take(4 * kMiB, 8 * kMiB);
  ASSERT_NE(a, 0u);
  Signal* gate = NewSignal();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(Gate(out_, gate, /*open_by_test=*/true));
  sw::Fence* copy = fences_->Record(out_);  // "the copy reading it", held behind the gate
  ASSERT_NE(copy, nullptr);
  pool_->Release(a, 4 * kMiB, copy);
  fences_->Unref(copy);
  EXPECT_EQ(pool_->Trim(0, /*wait=*/false), 0u);
  EXPECT_EQ(pool_->held_bytes(), 4 * kMiB);
  Open(gate);
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(pool_->Trim(0, /*wait=*/false), 4 * kMiB);
  EXPECT_EQ(pool_->held_bytes(), 0u);
}

TEST_F(VmmBufferPoolTest, ARefusedCreateIsNotRetriedUntilUnblocked) {
  Start(CU_MEM_LOCATION_TYPE_DEVICE, 7);  // simgpu has one device here: no device 7
  const std::uint64_t creates = Calls("cuMemCreate");
  EXPECT_EQ(Take(2 * kMiB, 8 * kMiB), 0u);
  EXPECT_EQ(Calls("cuMemCreate"), creates + 1);
  EXPECT_EQ(Take(2 * kMiB, 8 * kMiB), 0u);
  EXPECT_EQ(Calls("cuMemCreate"), creates + 1);  // blocked: no driver call
  pool_->Unblock();
  EXPECT_EQ(Take(2 * kMiB, 8 * kMiB), 0u);
  EXPECT_EQ(Calls("cuMemCreate"), creates + 2);
  EXPECT_EQ(pool_->held_bytes(), 0u);
}

}  // namespace
}  // namespace swap_test
