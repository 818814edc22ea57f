// HostMapper on simgpu: a swapped-out allocation mapped to host memory shows its contents to the
// device at its own VA, and what the device writes there comes back to the host copy when the
// mapping goes.
#include "parts_fixture.h"

namespace swap_test {
namespace {

TEST_F(PartsFixture, HostMapperMapsContentsToHostMemoryAndBringsWritesBack) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 6);
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  const std::uint64_t in_bytes = Count(counters_.swap_in_bytes);
  ASSERT_CU(host_maps_->Map(a, compute_));  // the stale mapping goes first
  EXPECT_NE(a->host_map, 0u);
  EXPECT_TRUE(a->chunks.empty());  // the old chunks no longer hold the contents
  EXPECT_EQ(unmaps_->pending(), 0u);
  EXPECT_EQ(Count(counters_.swap_in_bytes), in_bytes + 2 * kChunk);
  EXPECT_EQ(Mismatches(a->va, 2 * kChunk, 6), 0u);  // compute_ waited for the fill
  ASSERT_CU(Fill(a->va, 2 * kChunk, 7, compute_));  // a write through the host mapping
  a->last_stream = compute_;
  const std::uint64_t stalls = Count(counters_.stall_count);
  ASSERT_CU(host_maps_->Unmap(a));
  EXPECT_EQ(a->host_map, 0u);
  EXPECT_FALSE(a->mapped);
  EXPECT_EQ(Count(counters_.stall_count), stalls + 1);
  EXPECT_EQ(HostMismatches(a->host, 2 * kChunk, 7), 0u);
}

}  // namespace
}  // namespace swap_test
