// SwapEngine on the program's own VMM ranges (AdoptedRanges and HostMapper, docs/executor.md
// "Program VMM"): adoption at the program's VA, unmap/remap with the contents kept, and reached
// pages that do not fit mapped to host memory with their contents (reads and writes go through, and
// come back).
#include "sim_fixture.h"

namespace swap_test {
namespace {

class AdoptTest : public SwapFixture {
 protected:
  CUdeviceptr Reserve(std::size_t bytes) {
    CUdeviceptr va = 0;
    EXPECT_CU(api_.mem_address_reserve(&va, bytes, 0, 0, 0));
    return va;
  }
  std::uint64_t CheckNow(CUdeviceptr p, std::size_t bytes, std::uint32_t seed) {
    EXPECT_CU(Check(p, bytes, seed, compute_, 0));
    EXPECT_CU(ctx_sync_());
    return results_[0];
  }
};

TEST_F(AdoptTest, AnAdoptedRangeKeepsItsContentsAcrossUnmapAndRemap) {
  StartEngine();
  const CUdeviceptr r1 = Reserve(4 * kMiB), r2 = Reserve(4 * kMiB);
  sw::AllocId id = 0;
  ASSERT_CU(engine_->Adopt(r1, 4 * kMiB, &id));
  EXPECT_EQ(engine_->Find(r1 + kMiB), id);
  ASSERT_CU(Fill(r1, 4 * kMiB, 5, compute_));
  ASSERT_CU(ctx_sync_());
  ASSERT_CU(engine_->Unadopt(id, /*keep=*/true));
  EXPECT_EQ(engine_->Find(r1), 0u);
  ASSERT_CU(engine_->Rebind(id, r2, nullptr));
  EXPECT_EQ(CheckNow(r2, 4 * kMiB, 5), 0u);
  ASSERT_CU(engine_->Unadopt(id, /*keep=*/false));
  // Nothing of ours is left mapped in the program's reservations.
  EXPECT_CU(api_.mem_address_free(r1, 4 * kMiB));
  EXPECT_CU(api_.mem_address_free(r2, 4 * kMiB));
  EXPECT_EQ(engine_->Unadopt(id, false), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(AdoptTest, ASwappedOutAdoptedRangeComesBackAtItsNewAddress) {
  StartEngine();
  const CUdeviceptr r1 = Reserve(4 * kMiB), r2 = Reserve(4 * kMiB);
  sw::AllocId id = 0;
  ASSERT_CU(engine_->Adopt(r1, 4 * kMiB, &id));
  ASSERT_CU(Fill(r1, 4 * kMiB, 9, compute_));
  ASSERT_CU(engine_->SwapOut(id, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_CU(engine_->Unadopt(id, /*keep=*/true));
  EXPECT_EQ(engine_->Rebind(id, r2 + 4096, nullptr), CUDA_ERROR_INVALID_VALUE);  // unaligned
  ASSERT_CU(engine_->Rebind(id, r2, nullptr));
  EXPECT_EQ(engine_->State(id), sw::Residency::kResident);
  EXPECT_EQ(CheckNow(r2, 4 * kMiB, 9), 0u);
  ASSERT_CU(engine_->Unadopt(id, false));
  EXPECT_CU(api_.mem_address_free(r1, 4 * kMiB));
  EXPECT_CU(api_.mem_address_free(r2, 4 * kMiB));
}

TEST_F(AdoptTest, AReachedPageThatDoesNotFitIsReadAndWrittenThroughHostMemory) {
  sw::SwapEngineOptions o;
  o.device_limit_bytes = 6 * kMiB;  // three chunks
  StartEngine(o);
  const CUdeviceptr run = Reserve(6 * kMiB);
  sw::AllocId a = 0, b = 0, c = 0;
  ASSERT_CU(engine_->Adopt(run, 2 * kMiB, &a));
  ASSERT_CU(engine_->Adopt(run + 2 * kMiB, 4 * kMiB, &b));
  ASSERT_CU(Fill(run + 2 * kMiB, 4 * kMiB, 2, compute_));
  engine_->NoteUse(b, compute_);  // as the shim does at a page's first use (eviction fences)
  // A 4 MiB allocation evicts B (closest size); its stale mapping goes at the flush.
  CUdeviceptr cp = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &cp, &c));
  EXPECT_EQ(engine_->State(b), sw::Residency::kSwappedOut);
  ASSERT_CU(Fill(cp, 4 * kMiB, 3, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  // An op names A and may reach B; C holds the rest of the limit: B is mapped to host memory.
  ASSERT_CU(engine_->PrepareSpan(&a, 1, &b, 1, compute_));
  EXPECT_EQ(engine_->State(b), sw::Residency::kSwappedOut);
  EXPECT_EQ(engine_->State(c), sw::Residency::kResident);
  EXPECT_EQ(CheckNow(run + 2 * kMiB, 4 * kMiB, 2), 0u);
  ASSERT_CU(Fill(run + 2 * kMiB, 4 * kMiB, 4, compute_));  // a write through the host mapping
  ASSERT_CU(ctx_sync_());
  EXPECT_LE(PhysicalPeak(), 6 * kMiB);
  // Needed on the device again: the contents written through host memory come back.
  const std::uint64_t stalls = sw::SwapCounters::Get(counters_.stall_count);
  ASSERT_CU(engine_->Free(c, compute_));
  ASSERT_CU(engine_->FaultIn(b));
  EXPECT_EQ(engine_->State(b), sw::Residency::kResident);
  EXPECT_GT(sw::SwapCounters::Get(counters_.stall_count), stalls);
  EXPECT_EQ(CheckNow(run + 2 * kMiB, 4 * kMiB, 4), 0u);
  ASSERT_CU(engine_->Unadopt(a, false));
  ASSERT_CU(engine_->Unadopt(b, false));
  engine_->FlushUnmaps(/*all=*/true);
  EXPECT_CU(api_.mem_address_free(run, 6 * kMiB));
}

TEST_F(AdoptTest, UnmappingAHostMappedPageReleasesItsHostMapping) {
  sw::SwapEngineOptions o;
  o.device_limit_bytes = 4 * kMiB;
  StartEngine(o);
  const CUdeviceptr run = Reserve(4 * kMiB);
  sw::AllocId a = 0, b = 0, c = 0;
  ASSERT_CU(engine_->Adopt(run, 2 * kMiB, &a));
  ASSERT_CU(engine_->Adopt(run + 2 * kMiB, 2 * kMiB, &b));
  ASSERT_CU(Fill(run + 2 * kMiB, 2 * kMiB, 6, compute_));
  engine_->NoteUse(b, compute_);
  ASSERT_CU(engine_->SwapOut(b, compute_));
  CUdeviceptr cp = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &cp, &c));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();
  ASSERT_CU(engine_->PrepareSpan(&a, 1, &b, 1, compute_));
  EXPECT_EQ(CheckNow(run + 2 * kMiB, 2 * kMiB, 6), 0u);
  // The program unmaps B with its handle alive, then maps it again: still the same contents.
  ASSERT_CU(engine_->Unadopt(b, /*keep=*/true));
  ASSERT_CU(engine_->Free(c, compute_));
  ASSERT_CU(engine_->Rebind(b, run + 2 * kMiB, nullptr));
  EXPECT_EQ(CheckNow(run + 2 * kMiB, 2 * kMiB, 6), 0u);
  ASSERT_CU(engine_->Unadopt(a, false));
  ASSERT_CU(engine_->Unadopt(b, false));
  engine_->FlushUnmaps(/*all=*/true);
  EXPECT_CU(api_.mem_address_free(run, 4 * kMiB));
}

}  // namespace
}  // namespace swap_test
