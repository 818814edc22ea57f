// UnmapBatcher on simgpu: a deferred unmap waits for its copy's fence, a batch counts one device
// synchronisation, a forced unmap takes every completed one along, and a freed range's VA goes
// back to the driver after its unmap.
#include "parts_fixture.h"

namespace swap_test {
namespace {

TEST_F(PartsFixture, UnmapBatcherShouldUnmapOnlyRangesWhoseFenceCompleted) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 1);
  Signal* gate = NewSignal();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(Gate(compute_, gate, /*open_by_test=*/true));
  unmaps_->Defer(a->id, a->va, a->span, fences_->Record(compute_));
  EXPECT_EQ(unmaps_->Flush(/*all=*/false), 0u);  // the fence is behind the closed gate
  EXPECT_TRUE(a->mapped);
  EXPECT_EQ(unmaps_->pending(), 1u);
  Open(gate);
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(unmaps_->Flush(/*all=*/false), 1u);
  EXPECT_FALSE(a->mapped);
  EXPECT_EQ(unmaps_->pending(), 0u);
  EXPECT_EQ(Count(counters_.device_syncs), 1u);
  EXPECT_EQ(Count(counters_.stall_count), 0u);  // nobody waited on the host
}

TEST_F(PartsFixture, UnmapBatcherShouldTakeCompletedRangesAlongWithAForcedUnmap) {
  StartParts();
  sw::Allocation* a = NewFilled(kChunk, 1);
  sw::Allocation* b = NewFilled(kChunk, 2);
  sw::Allocation* c = NewFilled(kChunk, 3);
  for (sw::Allocation* x : {a, b, c}) {
    unmaps_->Defer(x->id, x->va, x->span, fences_->Record(compute_));
  }
  ASSERT_CU(ctx_sync_());
  unmaps_->ForceUnmap(b, /*count_stall=*/true);
  EXPECT_FALSE(a->mapped);
  EXPECT_FALSE(b->mapped);
  EXPECT_FALSE(c->mapped);
  EXPECT_EQ(Count(counters_.unmaps), 3u);
  EXPECT_EQ(Count(counters_.forced_unmaps), 1u);
  EXPECT_EQ(Count(counters_.device_syncs), 1u);  // one synchronisation for the whole batch
  EXPECT_EQ(Count(counters_.stall_count), 0u);   // the copy (fence) had completed
}

TEST_F(PartsFixture, UnmapBatcherShouldReleaseAnOrphanedRangesVaAndForgetACancelledOne) {
  StartParts();
  sw::Allocation* a = NewFilled(kChunk, 1);
  sw::Allocation* b = NewFilled(kChunk, 2);
  unmaps_->Defer(a->id, a->va, a->span, fences_->Record(compute_));
  unmaps_->Defer(b->id, b->va, b->span, fences_->Record(compute_));
  EXPECT_FALSE(unmaps_->Orphan(12345));  // nothing pending for it
  EXPECT_TRUE(unmaps_->Orphan(a->id));   // `a` freed meanwhile
  unmaps_->Cancel(b->id);                // `b` keeps its mappings (a reclaim)
  EXPECT_EQ(unmaps_->pending(), 1u);
  ASSERT_CU(ctx_sync_());
  const std::uint64_t reserves = Count(counters_.vmm_reserves);
  EXPECT_EQ(unmaps_->Flush(/*all=*/false), 1u);
  EXPECT_EQ(Count(counters_.vmm_reserves), reserves + 1);  // a's VA went back to the driver
  EXPECT_TRUE(b->mapped);
  // `a`'s record is the test's to drop now (its VA is gone).
  chunks_->Release(a->chunks, nullptr, nullptr);
  table_.Unindex(a->va);
  table_.Erase(a->id);
}

}  // namespace
}  // namespace swap_test
