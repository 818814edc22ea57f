// Discarder on simgpu (shim/src/swap/discarder.h): an allocation served by a freed range or by
// reused chunks gets them without the dead bytes (zeros, pages released, discarded_bytes), a
// swap-in writes reused chunks whole without leaving their old bytes (no discard needed), the
// host buffer it read is discarded after its last use, a
// reclaim (live bytes) is never discarded, and every tensor's data comes back the same with the
// discard entry point and without it (as on a real driver).
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "parts_fixture.h"

namespace swap_test {
namespace {

/// Pages of [p, p + n) resident in this process (mincore): the host RAM simgpu holds for them.
std::size_t ResidentPages(std::uintptr_t p, std::size_t n) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((n + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(p), n, vec.data()) != 0) return SIZE_MAX;
  std::size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

class DiscarderTest : public PartsFixture {
 protected:
  /// Non-zero bytes of [p, p + n), read after the device is idle.
  std::size_t NonZero(CUdeviceptr p, std::size_t n) {
    EXPECT_CU(ctx_sync_());
    std::vector<unsigned char> back(n, 0xFF);
    EXPECT_CU(dtoh_(back.data(), p, n));
    std::size_t bad = 0;
    for (unsigned char b : back) bad += b != 0;
    return bad;
  }
  /// Swaps `a` out, lets `b` (a new allocation) take its chunks, swaps `a` back in (evicting
  /// `b`), and `b` back in: every byte of both must survive. Returns discarded_bytes.
  std::uint64_t RoundTrip() {
    StartParts(/*limit=*/2 * kChunk);
    sw::Allocation* a = NewFilled(2 * kChunk, 9);
    const sw::AllocId a_id = a->id;
    EXPECT_CU(transfers_->SwapOut(a, compute_));
    EXPECT_EQ(Count(counters_.discarded_bytes), 0u);  // fresh chunks hold nothing to discard
    CUdeviceptr b_ptr = 0;
    sw::AllocId b_id = 0;
    EXPECT_CU(allocator_->Allocate(2 * kChunk, compute_, &b_ptr, &b_id, nullptr));
    if (api_.mem_discard_async) {
      EXPECT_EQ(NonZero(b_ptr, 2 * kChunk), 0u);
    } else {
      EXPECT_GT(NonZero(b_ptr, 2 * kChunk), 0u);  // a's old bytes: what the discard removes
    }
    EXPECT_CU(Fill(b_ptr, 2 * kChunk, 3, compute_));
    a = table_.Get(a_id);
    const auto a_host = reinterpret_cast<std::uintptr_t>(a->host);
    EXPECT_CU(residency_->WaitResident(a, compute_));  // evicts b, copies a into b's chunks
    EXPECT_EQ(Mismatches(a->va, 2 * kChunk, 9), 0u);
    if (api_.mem_discard_async) {
      EXPECT_EQ(ResidentPages(a_host, 2 * kChunk), 0u);
    }
    sw::Allocation* b = table_.Get(b_id);
    EXPECT_EQ(b->state, sw::Residency::kSwappedOut);
    EXPECT_CU(residency_->WaitResident(b, compute_));
    EXPECT_EQ(Mismatches(b->va, 2 * kChunk, 3), 0u);
    return Count(counters_.discarded_bytes);
  }
};

TEST_F(DiscarderTest, ShouldHandAFreedRangeToANewAllocationWithoutItsBytes) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 7);
  const CUdeviceptr va = a->va;
  ASSERT_CU(ctx_sync_());
  ASSERT_EQ(ResidentPages(va, 2 * kChunk), 2 * kChunk / 4096);
  ASSERT_CU(allocator_->Free(a->id, compute_));
  CUdeviceptr p = 0;
  sw::AllocId id = 0;
  ASSERT_CU(allocator_->Allocate(2 * kChunk, other_, &p, &id, nullptr));
  ASSERT_EQ(p, va);
  EXPECT_EQ(Count(counters_.range_reuses), 1u);
  EXPECT_EQ(Count(counters_.discarded_bytes), 2 * kChunk);
  ASSERT_CU(ctx_sync_());
  EXPECT_EQ(ResidentPages(va, 2 * kChunk), 0u);
  EXPECT_EQ(NonZero(p, 2 * kChunk), 0u);
  // A release makes the chunks stale again (their owner may have written them): the next
  // allocation served by them discards them again.
  ASSERT_CU(allocator_->Free(id, other_));
  ASSERT_CU(allocator_->Allocate(2 * kChunk, compute_, &p, &id, nullptr));
  EXPECT_EQ(Count(counters_.discarded_bytes), 4 * kChunk);
}

TEST_F(DiscarderTest, ShouldNotDiscardChunksAReclaimTakesBack) {
  StartParts();
  sw::Allocation* a = NewFilled(2 * kChunk, 1);
  ASSERT_CU(transfers_->SwapOut(a, compute_));
  ASSERT_CU(residency_->SwapIn(a));
  EXPECT_EQ(Count(counters_.reclaims), 1u);
  ASSERT_CU(residency_->WaitResident(a, other_));
  EXPECT_EQ(Mismatches(a->va, 2 * kChunk, 1), 0u);
  // Nor the host buffer of the swap-out: no swap-in read it (it is simply given back).
  EXPECT_EQ(Count(counters_.discarded_bytes), 0u);
}

TEST_F(DiscarderTest, ShouldKeepEveryByteThroughSwapsWithTheDiscardAndCountIt) {
  ASSERT_NE(api_.mem_discard_async, nullptr);  // simgpu exports it
  // In chunks: b's allocation on a's old ones (2); a's host buffer once read (2); b's host buffer
  // once read (2). The swap-ins into each other's old chunks write them whole: not discarded.
  EXPECT_EQ(RoundTrip(), 6 * kChunk);
}

TEST_F(DiscarderTest, ShouldLeaveNoStaleBytesWhereASwapInWritesReusedChunksWhole) {
  StartParts(/*limit=*/2 * kChunk);
  // a: two chunks of which one byte was ever written (sparse, like a sampled tensor).
  CUdeviceptr a_ptr = 0;
  sw::AllocId a_id = 0;
  ASSERT_CU(allocator_->Allocate(2 * kChunk, compute_, &a_ptr, &a_id, nullptr));
  const unsigned char mark = 0x5C;
  ASSERT_CU(ctx_sync_());
  ASSERT_CU(htod_(a_ptr + kChunk + 17, &mark, 1));
  ASSERT_CU(transfers_->SwapOut(table_.Get(a_id), compute_));
  // b takes a's chunks and writes every byte of them; a's swap-in then lands on b's old chunks.
  sw::Allocation* b = NewFilled(2 * kChunk, 3);
  ASSERT_NE(b, nullptr);
  const std::uint64_t discarded_before = Count(counters_.discarded_bytes);
  sw::Allocation* a = table_.Get(a_id);
  ASSERT_CU(residency_->WaitResident(a, compute_));  // evicts b, copies a into b's chunks
  ASSERT_CU(ctx_sync_());
  // No discard of the chunks the copy writes whole (only a's host buffer, once read) ...
  EXPECT_EQ(Count(counters_.discarded_bytes) - discarded_before, 2 * kChunk);
  // ... and none of b's bytes are left in them: one written byte, one resident page.
  EXPECT_EQ(ResidentPages(a->va, 2 * kChunk), 1u);
  EXPECT_EQ(NonZero(a->va, 2 * kChunk), 1u);
  unsigned char back = 0;
  ASSERT_CU(dtoh_(&back, a->va + kChunk + 17, 1));
  EXPECT_EQ(back, mark);
}

TEST_F(DiscarderTest, ShouldKeepEveryByteThroughSwapsWithoutTheDiscardEntryPoint) {
  api_.mem_discard_async = nullptr;  // a real driver: the symbol does not exist
  EXPECT_EQ(RoundTrip(), 0u);
}

}  // namespace
}  // namespace swap_test
