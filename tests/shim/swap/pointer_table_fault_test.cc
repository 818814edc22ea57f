// Pointer tables whose target is unmapped: simgpu faults on purpose, so plain build only (no
// sanitize/concurrent label; see pointer_table_test.cc for the rest).
#include "pointer_table_fixture.h"

namespace swap_test {
namespace {

// (a), after the boundary: the evicted target's range is unmapped, the launch (accepted: its
// arguments are a table and an output, both resident) faults when the kernel follows the table.
TEST_F(PointerTableFixture, WithoutExclusionAnUnmappedTargetFaultsTheKernel) {
  std::uint64_t mismatches = 0;
  EXPECT_EQ(PressureScenario(/*pin=*/false, /*flush=*/true, &mismatches),
            CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(engine_->State(id_t_), sw::Residency::kSwappedOut);
  EXPECT_FALSE(engine_->UnmapPending(id_t_));
}

// (b), after the boundary: pinned, the target is never unmapped and the gather is correct.
TEST_F(PointerTableFixture, PinnedTargetStaysMappedAcrossTheBoundary) {
  std::uint64_t mismatches = ~0ull;
  ASSERT_CU(PressureScenario(/*pin=*/true, /*flush=*/true, &mismatches));
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace swap_test
