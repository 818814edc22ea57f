// Pointer tables on simgpu with the executor (docs/executor.md, "Pointer tables"): the hazard is
// real (a table's target evicted under pressure is read as another tensor's data, and the safety
// net cannot see it), the scanner finds the target so pinning it keeps the data correct, and
// what the sampled scan does not cover, one test each. The faulting variant (target unmapped)
// is in pointer_table_fault_test.cc, outside the sanitizer presets.
#include "pointer_table_fixture.h"

namespace swap_test {
namespace {

using sw::Residency;

std::uint64_t C(const std::atomic<std::uint64_t>& c) { return c.load(); }

// (a) Without exclusion: V's allocation evicts T, whose VA still aliases the chunks V now fills
// (its unmap is deferred to the boundary); the launch names only the table and the output, so
// the safety net does nothing and the kernel reads V's data for every word.
TEST_F(PointerTableFixture, WithoutExclusionTheTablesTargetIsEvictedAndReadWrong) {
  std::uint64_t mismatches = 0;
  ASSERT_CU(PressureScenario(/*pin=*/false, /*flush=*/false, &mismatches));
  EXPECT_EQ(engine_->State(id_t_), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.evictions), 1u);
  EXPECT_EQ(C(counters_.fault_ins), 0u);  // the safety net saw nothing to do
  EXPECT_EQ(mismatches, kEntries * kEntryBytes / 4);
}

// (b) With the scanner's targets pinned, the same pressure evicts U instead; T stays resident
// through repeated evictions and the kernel reads T's data.
TEST_F(PointerTableFixture, ScannedTargetsPinnedSurvivePressureAndReadCorrectly) {
  std::uint64_t mismatches = ~0ull;
  ASSERT_CU(PressureScenario(/*pin=*/true, /*flush=*/false, &mismatches));
  ASSERT_EQ(targets_, std::vector<CUdeviceptr>{t_});  // only T: the table and output are not
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(engine_->State(id_t_), Residency::kResident);
  EXPECT_EQ(engine_->State(id_u_), Residency::kSwappedOut);
  // More pressure: U and V take turns evicting each other; T is never chosen.
  for (int round = 0; round < 4; ++round) {
    ASSERT_CU(engine_->WaitResident(round % 2 ? id_v_ : id_u_, compute_));
    ASSERT_EQ(engine_->State(id_t_), Residency::kResident) << "round " << round;
    ASSERT_CU(Fill(out_, kEntries * kEntryBytes, 1, compute_));  // clobber the output
    ASSERT_CU(Gather(table_, kEntries, kEntryBytes, out_, compute_));
    ASSERT_CU(stream_sync_(compute_));
    ASSERT_EQ(OutputMismatches(out_), 0u) << "round " << round;
  }
  EXPECT_EQ(C(counters_.evictions), 5u);
  EXPECT_EQ(engine_->SwapOut(id_t_, compute_), CUDA_ERROR_NOT_PERMITTED);
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();  // an iteration boundary: T stays mapped and correct
  ASSERT_CU(Gather(table_, kEntries, kEntryBytes, out_, compute_));
  ASSERT_CU(stream_sync_(compute_));
  EXPECT_EQ(OutputMismatches(out_), 0u);
}

// The scan's report through the driver: which allocation holds the table, how many words.
TEST_F(PointerTableFixture, ScanOverTheDriverReportsTableTargetAndCounts) {
  StartEngine();
  CUdeviceptr a = 0, b = 0;
  sw::AllocId ida = 0, idb = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &a, &ida));
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &b, &idb));
  const CUdeviceptr table = Table({a, a + 8, b + 4096, 0, 12345});
  const CUdeviceptr other = Plain(256);
  const std::vector<sw::Range> ranges = {{a, 4 * kMiB}, {b, 2 * kMiB}, {table, 40}, {other, 256}};
  const sw::ScanResult r = sw::ScanPointerTables(api_, ranges, sw::ScanOptions{});
  ASSERT_EQ(r.error, CUDA_SUCCESS);
  ASSERT_EQ(r.links.size(), 2u);
  EXPECT_EQ(r.links[0].table, 2u);
  EXPECT_EQ(r.links[0].target, 0u);
  EXPECT_EQ(r.links[0].count, 2u);
  EXPECT_EQ(r.links[1].target, 1u);
  EXPECT_EQ(r.links[1].count, 1u);
  EXPECT_EQ(r.targets, (std::vector<CUdeviceptr>{std::min(a, b), std::max(a, b)}));
  EXPECT_EQ(r.stats.ranges_complete, 2u);  // the two small ones
  EXPECT_EQ(r.stats.bytes_copied, 40u + 256u + 2 * 24576u);
  EXPECT_EQ(r.stats.batches, 1u);
}

// (c1) Not covered: a table in bytes the sample does not read. A 1 MiB table allocation is read
// at its head, tail and four 4 KiB windows; an entry between them is missed, and its target is
// then as exposed as in test (a). The same entry in the head is found.
TEST_F(PointerTableFixture, NotCoveredATableOutsideTheSampledBytes) {
  StartEngine();
  CUdeviceptr a = 0;
  sw::AllocId ida = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &a, &ida));
  const CUdeviceptr big = Plain(kMiB);
  const std::vector<sw::Range> ranges = {{a, 2 * kMiB}, {big, kMiB}};
  WriteWord(big + 300 * 1024, a);  // between the first (~129 KiB) and second (~383 KiB) window
  EXPECT_TRUE(sw::FindPointerTargets(api_, ranges, sw::ScanOptions{}).empty());
  WriteWord(big + 64, a);
  EXPECT_EQ(sw::FindPointerTargets(api_, ranges, sw::ScanOptions{}), std::vector<CUdeviceptr>{a});
}

// (c2) Not covered: pointers written after the scan. The scan is a snapshot of the detailed
// iteration; a table filled later is invisible until the next scan.
TEST_F(PointerTableFixture, NotCoveredAPointerWrittenAfterTheScan) {
  StartEngine();
  CUdeviceptr a = 0;
  sw::AllocId ida = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &a, &ida));
  const CUdeviceptr table = Plain(64);
  const std::vector<sw::Range> ranges = {{a, 2 * kMiB}, {table, 64}};
  const auto before = sw::FindPointerTargets(api_, ranges, sw::ScanOptions{});
  WriteWord(table, a);
  EXPECT_TRUE(before.empty());
  EXPECT_EQ(sw::FindPointerTargets(api_, ranges, sw::ScanOptions{}), std::vector<CUdeviceptr>{a});
}

// (c3) Not covered: pointers into memory the caller does not pass as a range — an allocation
// the shim does not track, pinned host memory. Only tracked allocations can be targets (and
// only they can be swapped, so nothing is lost), and only tracked allocations are read as tables.
TEST_F(PointerTableFixture, NotCoveredPointersIntoUntrackedMemory) {
  StartEngine();
  CUdeviceptr a = 0;
  sw::AllocId ida = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &a, &ida));
  const CUdeviceptr untracked = Plain(4096);
  const CUdeviceptr hidden_table = Plain(64);  // an untracked table pointing at a tracked tensor
  WriteWord(hidden_table, a);
  const CUdeviceptr table =
      Table({untracked, reinterpret_cast<CUdeviceptr>(results_), untracked + 100});
  const std::vector<sw::Range> ranges = {{a, 2 * kMiB}, {table, 24}};
  const sw::ScanResult r = sw::ScanPointerTables(api_, ranges, sw::ScanOptions{});
  EXPECT_EQ(r.error, CUDA_SUCCESS);
  EXPECT_TRUE(r.targets.empty());
  EXPECT_TRUE(r.links.empty());
}

// Ranges marked unreadable (swapped out) are never read — reading them would fault — but stay
// possible targets.
TEST_F(PointerTableFixture, SwappedOutRangesAreTargetsButNeverRead) {
  StartEngine();
  CUdeviceptr a = 0, b = 0;
  sw::AllocId ida = 0, idb = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &a, &ida));
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &b, &idb));
  WriteWord(b, a);  // b's first word points at a...
  ASSERT_CU(engine_->SwapOut(idb, compute_));
  ASSERT_CU(ctx_sync_());
  engine_->FlushUnmaps();  // ...but b is unmapped now
  const CUdeviceptr table = Table({b + 16});
  const std::vector<sw::Range> ranges = {{a, 2 * kMiB}, {b, 2 * kMiB, false}, {table, 8}};
  const sw::ScanResult r = sw::ScanPointerTables(api_, ranges, sw::ScanOptions{});
  ASSERT_EQ(r.error, CUDA_SUCCESS);
  EXPECT_EQ(r.targets, std::vector<CUdeviceptr>{b});
  EXPECT_EQ(r.stats.bytes_copied, 8u + 24576u);
}

}  // namespace
}  // namespace swap_test
