// FenceSweep on simgpu: a drained stream's batch of fences costs one driver query, a fence behind
// a pending one is pending, one stream's answer never stands for another's, the shared default
// stream handles are asked fence by fence; and the unmap batch that uses it.
#include "swap/fence_sweep.h"
#include "parts_fixture.h"

namespace swap_test {
namespace {

using sw::FenceSweep;

class FenceSweepTest : public PartsFixture {
 protected:
  /// `n` fences recorded on `stream` (references kept by `owned_`, dropped at the end).
  std::vector<const sw::Fence*> Record(CUstream stream, int n) {
    std::vector<const sw::Fence*> out;
    for (int i = 0; i < n; ++i) {
      sw::Fence* f = fences_->Record(stream);
      EXPECT_NE(f, nullptr);
      owned_.push_back(f);
      out.push_back(f);
    }
    return out;
  }
  void TearDown() override {
    for (sw::Fence* f : owned_) fences_->Unref(f);
    PartsFixture::TearDown();
  }
  std::vector<sw::Fence*> owned_;
};

TEST_F(FenceSweepTest, ShouldAnswerADrainedStreamsWholeBatchWithOneQuery) {
  StartParts();
  const auto batch = Record(compute_, 50);
  ASSERT_CU(ctx_sync_());
  FenceSweep sweep(fences_.get());
  const std::uint64_t queries = Calls("cuEventQuery");
  sweep.Prime(batch);
  for (const sw::Fence* f : batch) EXPECT_TRUE(sweep.Done(f));
  EXPECT_EQ(sweep.queries(), 1u);
  EXPECT_EQ(Calls("cuEventQuery"), queries + 1);
  EXPECT_TRUE(sweep.Done(nullptr));  // nothing to wait for
}

TEST_F(FenceSweepTest, ShouldSeeEveryFenceBehindAPendingOnePendingAndTheOnesBeforeItDone) {
  StartParts();
  const auto before = Record(compute_, 2);
  ASSERT_CU(ctx_sync_());
  Signal* gate = NewSignal();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(Gate(compute_, gate, /*open_by_test=*/true));
  const auto behind = Record(compute_, 3);
  FenceSweep sweep(fences_.get());
  std::vector<const sw::Fence*> all(before);
  all.insert(all.end(), behind.begin(), behind.end());
  sweep.Prime(all);  // the newest: pending
  EXPECT_EQ(sweep.queries(), 1u);
  EXPECT_FALSE(sweep.Done(behind[2]));  // known
  EXPECT_EQ(sweep.queries(), 1u);
  EXPECT_FALSE(sweep.Done(behind[0]));  // older: asked, pending
  EXPECT_FALSE(sweep.Done(behind[1]));  // between it and the newest: known
  EXPECT_EQ(sweep.queries(), 2u);
  EXPECT_TRUE(sweep.Done(before[1]));  // asked, complete
  EXPECT_TRUE(sweep.Done(before[0]));  // recorded before it: known
  EXPECT_EQ(sweep.queries(), 3u);
  Open(gate);
  ASSERT_CU(ctx_sync_());
  FenceSweep after(fences_.get());
  after.Prime(all);
  for (const sw::Fence* f : all) EXPECT_TRUE(after.Done(f));
  EXPECT_EQ(after.queries(), 1u);
}

TEST_F(FenceSweepTest, ShouldNeverLetOneStreamAnswerForAnother) {
  StartParts();
  Signal* gate = NewSignal();
  ASSERT_NE(gate, nullptr);
  ASSERT_CU(Gate(other_, gate, /*open_by_test=*/true));
  const auto held = Record(other_, 2);
  const auto drained = Record(compute_, 2);
  ASSERT_CU(api_.event_synchronize(drained[1]->event));  // compute_ drained, other_ held
  FenceSweep sweep(fences_.get());
  sweep.Prime({held[0], drained[0], held[1], drained[1]});
  EXPECT_EQ(sweep.queries(), 2u);  // the newest of each stream
  EXPECT_TRUE(sweep.Done(drained[0]));
  EXPECT_FALSE(sweep.Done(held[1]));
  EXPECT_FALSE(sweep.Done(held[0]));  // asked: the other stream's answer does not stand for it
  EXPECT_EQ(sweep.queries(), 3u);
  Open(gate);
  ASSERT_CU(ctx_sync_());
}

TEST_F(FenceSweepTest, ShouldAskEachFenceOfASharedDefaultStreamHandle) {
  StartParts();
  // The null stream is one per context, CU_STREAM_PER_THREAD one per thread: no inference.
  const auto legacy = Record(nullptr, 3);
  const auto per_thread = Record(CU_STREAM_PER_THREAD, 3);
  ASSERT_CU(ctx_sync_());
  FenceSweep sweep(fences_.get());
  std::vector<const sw::Fence*> all(legacy);
  all.insert(all.end(), per_thread.begin(), per_thread.end());
  sweep.Prime(all);
  EXPECT_EQ(sweep.queries(), 0u);
  for (const sw::Fence* f : all) EXPECT_TRUE(sweep.Done(f));
  EXPECT_EQ(sweep.queries(), 6u);
}

TEST_F(PartsFixture, UnmapBatcherShouldCheckADrainedBatchWithOneQueryPerStream) {
  StartParts();
  std::vector<sw::Allocation*> swapped;
  for (std::uint32_t i = 0; i < 20; ++i) {
    sw::Allocation* a = NewFilled(kChunk, i + 1);
    unmaps_->Defer(a->id, a->va, a->span, fences_->Record(i % 2 == 0 ? compute_ : out_));
    swapped.push_back(a);
  }
  ASSERT_CU(ctx_sync_());
  const std::uint64_t queries = Calls("cuEventQuery");
  EXPECT_EQ(unmaps_->Flush(/*all=*/false), 20u);
  EXPECT_EQ(Calls("cuEventQuery"), queries + 2);  // one per stream, not one per range
  for (const sw::Allocation* a : swapped) EXPECT_FALSE(a->mapped);
}

}  // namespace
}  // namespace swap_test
