// AdoptedRanges on simgpu: an adopted range lives at the program's VA, which is never reserved
// or freed here; detached with its contents kept, it cannot be evicted, and it comes back whole
// at a new VA — resident or swapped out.
#include "parts_fixture.h"

namespace swap_test {
namespace {

class AdoptedRangesTest : public PartsFixture {
 protected:
  CUdeviceptr ProgramReserve(std::size_t bytes) {
    CUdeviceptr va = 0;
    EXPECT_CU(api_.mem_address_reserve(&va, bytes, 0, 0, 0));
    return va;
  }
};

TEST_F(AdoptedRangesTest, ShouldKeepContentsAcrossUnadoptAndRebindWithoutTouchingTheVa) {
  StartParts();
  const CUdeviceptr r1 = ProgramReserve(2 * kChunk), r2 = ProgramReserve(2 * kChunk);
  sw::AllocId id = 0;
  ASSERT_CU(adopted_->Adopt(r1, 2 * kChunk, &id, nullptr));
  sw::Allocation* a = table_.Get(id);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->adopted);
  EXPECT_EQ(table_.Find(r1), id);
  ASSERT_CU(Fill(r1, 2 * kChunk, 5, compute_));
  ASSERT_CU(ctx_sync_());
  ASSERT_CU(adopted_->Unadopt(id, /*keep=*/true));
  EXPECT_EQ(table_.Find(r1), 0u);
  EXPECT_EQ(evictor_->PickClosest(2 * kChunk, 0), nullptr);  // detached: not evictable
  EXPECT_EQ(adopted_->Rebind(id, r2 + 4096, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(adopted_->Rebind(id, r2, nullptr));
  EXPECT_EQ(table_.Find(r2), id);
  EXPECT_EQ(Mismatches(r2, 2 * kChunk, 5), 0u);
  ASSERT_CU(adopted_->Unadopt(id, /*keep=*/false));
  EXPECT_EQ(table_.Get(id), nullptr);
  EXPECT_EQ(Count(counters_.vmm_reserves), 0u);      // the VA was always the program's
  EXPECT_CU(api_.mem_address_free(r1, 2 * kChunk));  // nothing of ours is left mapped
  EXPECT_CU(api_.mem_address_free(r2, 2 * kChunk));
}

TEST_F(AdoptedRangesTest, ShouldBringASwappedOutDetachedRangeBackAtItsNewVa) {
  StartParts();
  const CUdeviceptr r1 = ProgramReserve(2 * kChunk), r2 = ProgramReserve(2 * kChunk);
  sw::AllocId id = 0;
  ASSERT_CU(adopted_->Adopt(r1, 2 * kChunk, &id, nullptr));
  ASSERT_CU(Fill(r1, 2 * kChunk, 9, compute_));
  ASSERT_CU(transfers_->SwapOut(table_.Get(id), compute_));
  ASSERT_CU(adopted_->Unadopt(id, /*keep=*/true));  // waits for the copy, unmaps at once
  EXPECT_EQ(unmaps_->pending(), 0u);
  ASSERT_CU(adopted_->Rebind(id, r2, nullptr));
  EXPECT_EQ(table_.Get(id)->state, sw::Residency::kResident);
  EXPECT_EQ(Count(counters_.fault_ins), 1u);
  EXPECT_EQ(Mismatches(r2, 2 * kChunk, 9), 0u);
  ASSERT_CU(adopted_->Unadopt(id, /*keep=*/false));
  EXPECT_EQ(adopted_->Unadopt(id, false), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(api_.mem_address_free(r1, 2 * kChunk));
  EXPECT_CU(api_.mem_address_free(r2, 2 * kChunk));
}

}  // namespace
}  // namespace swap_test
