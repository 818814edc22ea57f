// Tests that make simgpu fault or race on purpose: plain build only (no sanitize/concurrent
// label). They prove that a swapped-out range is really unmapped, that the safety net repairs
// it, and that the data tests can see the race the swap-in wait prevents.
#include "sim_fixture.h"

namespace swap_test {
namespace {

TEST_F(SwapFixture, TouchingASwappedOutRangeIsAnIllegalAddress) {
  StartEngine();
  CUdeviceptr p = 0;
  sw::AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  ASSERT_CU(Touch(p, compute_));
  ASSERT_CU(stream_sync_(compute_));  // resident: fine
  ASSERT_CU(engine_->SwapOut(id, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_FALSE(engine_->UnmapPending(id));
  ASSERT_CU(Touch(p + 4096, compute_));
  EXPECT_EQ(stream_sync_(compute_), CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(SwapFixture, FaultInBeforeTheTouchMakesItWork) {
  StartEngine();
  CUdeviceptr p = 0;
  sw::AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  ASSERT_CU(Fill(p, 2 * kMiB, 8, compute_));
  ASSERT_CU(engine_->SwapOut(id, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_FALSE(engine_->UnmapPending(id));
  // What the shim's launch wrapper does when an argument points into a swapped-out range.
  ASSERT_EQ(engine_->Find(p + 4096), id);
  ASSERT_EQ(engine_->State(id), sw::Residency::kSwappedOut);
  ASSERT_CU(engine_->FaultIn(id));
  ASSERT_CU(Touch(p + 4096, compute_));
  ASSERT_CU(Check(p, 2 * kMiB, 8, compute_, 0));
  ASSERT_CU(stream_sync_(compute_));
  EXPECT_EQ(results_[0], 0u);
}

// The fault-injection switch: without the consumer's wait on the swap-in, the consumer reads the
// chunks' previous owner's data. (ConsumerOnAnotherStreamWaitsForTheSwapIn in engine_test runs
// the same probe with the wait and sees 0 mismatches.)
TEST_F(SwapFixture, SkippingTheSwapInWaitLetsTheConsumerSeeWrongData) {
  sw::SwapEngineOptions options;
  options.skip_swap_in_wait = true;
  StartEngine(options);
  EXPECT_EQ(GatedConsumerMismatches(),
            kMiB);  // all 1 Mi words of the 4 MiB tensor are wrong of the 4 MiB tensor is wrong
}

}  // namespace
}  // namespace swap_test
