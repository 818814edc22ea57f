// The pointer-table scanner's pure logic (shim/src/swap/pointer_scan.h): range lookup, word
// scanning, the sample plan and the batched copy loop, over host memory (a "device" address here
// is just a host address; the copy is a memcpy). No driver involved.
#include "swap/pointer_scan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "chameleon/ipc/event_ring.h"

namespace chameleon::shim::swap {
namespace {

// Copies host memory; optionally fails the Nth copy. Records the copies it saw.
class HostSource : public SampleSource {
 public:
  CUresult Copy(void* dst, CUdeviceptr src, std::size_t bytes) override {
    if (copies_ == fail_at_) return CUDA_ERROR_ILLEGAL_ADDRESS;
    ++copies_;
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
  }
  CUresult Wait() override {
    ++waits_;
    return CUDA_SUCCESS;
  }
  int copies_ = 0;
  int waits_ = 0;
  int fail_at_ = -1;
};

std::uint64_t Addr(const void* p) { return reinterpret_cast<std::uint64_t>(p); }

void Put(std::vector<std::uint64_t>* words, std::size_t i, std::uint64_t v) { (*words)[i] = v; }

TEST(RangeIndexTest, FindsTheContainingRangeAndNothingOutside) {
  const std::vector<Range> ranges = {{0x3000, 0x100}, {0x1000, 0x800}, {0x2000, 0x10}, {0x5000, 0}};
  const RangeIndex index(ranges);
  EXPECT_EQ(index.Find(0x1000), 1);
  EXPECT_EQ(index.Find(0x17ff), 1);
  EXPECT_EQ(index.Find(0x1800), -1);  // one past the end
  EXPECT_EQ(index.Find(0x0fff), -1);
  EXPECT_EQ(index.Find(0x2008), 2);
  EXPECT_EQ(index.Find(0x30ff), 0);
  EXPECT_EQ(index.Find(0x3100), -1);
  EXPECT_EQ(index.Find(0x5000), -1);  // empty ranges are never targets
  EXPECT_EQ(index.Find(0), -1);
  EXPECT_EQ(index.Find(~0ull), -1);
  EXPECT_EQ(index.lo(), 0x1000u);
  EXPECT_EQ(index.span(), 0x2100u);
  const RangeIndex none({});
  EXPECT_EQ(none.Find(0), -1);
  EXPECT_EQ(none.Find(0x1000), -1);
}

TEST(ScanWordsTest, ReportsAlignedWordsIntoOtherRangesWithCounts) {
  const std::vector<Range> ranges = {{0x10000, 0x1000}, {0x20000, 0x1000}, {0x30000, 0x1000}};
  const RangeIndex index(ranges);
  std::vector<std::uint64_t> w(40, 0);
  Put(&w, 0, 0x20000);   // base of range 1
  Put(&w, 1, 0x20ff8);   // interior of range 1: extends the same link
  Put(&w, 9, 0x30010);   // range 2
  Put(&w, 12, 0x10040);  // range 0 = the source itself: not a target
  Put(&w, 17, 0x21000);  // one past range 1's end: nothing
  Put(&w, 38, 0x20100);  // range 1 again, in the scalar tail of the loop
  std::vector<PointerLink> links;
  const auto words = ScanWords(reinterpret_cast<const unsigned char*>(w.data()), w.size() * 8,
                               0x10000, 0, index, &links);
  EXPECT_EQ(words, 40u);
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0].target, 1u);
  EXPECT_EQ(links[0].count, 2u);
  EXPECT_EQ(links[1].target, 2u);
  EXPECT_EQ(links[2].target, 1u);
  for (const auto& l : links) EXPECT_EQ(l.table, 0u);
}

TEST(ScanWordsTest, WordsAreAlignedInDeviceAddressesNotInTheHostCopy) {
  const std::vector<Range> ranges = {{0x10000, 0x100}, {0x90000, 0x100}};
  const RangeIndex index(ranges);
  // Host bytes copied from device address 0x10004: the first aligned device word starts 4 bytes
  // in. A pointer stored there is found; the same value at a misaligned device offset is not.
  unsigned char buf[4 + 8 + 8 + 3] = {};
  const std::uint64_t v = 0x90010;
  std::memcpy(buf + 4, &v, 8);  // device 0x10008: aligned; then one more word, 3 stray bytes
  std::vector<PointerLink> links;
  EXPECT_EQ(ScanWords(buf, sizeof(buf), 0x10004, 0, index, &links), 2u);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].target, 1u);
  unsigned char odd[24] = {};
  std::memcpy(odd + 4, &v, 8);  // device 0x10004: misaligned
  links.clear();
  EXPECT_EQ(ScanWords(odd, sizeof(odd), 0x10000, 0, index, &links), 3u);
  EXPECT_TRUE(links.empty());
  EXPECT_EQ(ScanWords(odd, 5, 0x10003, 0, index, &links), 0u);  // no whole word
}

TEST(PlanSamplesTest, SmallRangesWholeLargeRangesHeadTailAndWindows) {
  ScanOptions o;  // 4 KiB head, tail, 4 windows of 4 KiB: 24 KiB per large range
  const std::vector<Range> ranges = {{0x100000, 1u << 20}, {0x300000, 24 << 10}, {0x400000, 100}};
  ScanStats stats;
  const auto plan = PlanSamples(ranges, o, &stats);
  ASSERT_EQ(plan.size(), 2u + 6u);
  EXPECT_EQ(plan[0].range, 2u);  // smallest first, whole
  EXPECT_EQ(plan[0].bytes, 100u);
  EXPECT_EQ(plan[1].range, 1u);  // exactly the full sample: whole
  EXPECT_EQ(plan[1].bytes, 24u << 10);
  EXPECT_EQ(plan[2].offset, 0u);  // the 1 MiB range: head
  EXPECT_EQ(plan[2].bytes, 4096u);
  EXPECT_EQ(plan[3].offset, (1u << 20) - 4096);  // tail
  std::uint64_t prev_end = 4096;
  for (int k = 4; k < 8; ++k) {  // windows: inside (head, tail), ordered, 8-aligned, disjoint
    EXPECT_EQ(plan[k].bytes, 4096u);
    EXPECT_EQ(plan[k].offset % 8, 0u);
    EXPECT_GE(plan[k].offset, prev_end);
    prev_end = plan[k].offset + plan[k].bytes;
  }
  EXPECT_LE(prev_end, (1u << 20) - 4096);
  EXPECT_EQ(stats.ranges_sampled, 3u);
  EXPECT_EQ(stats.ranges_complete, 2u);
  EXPECT_EQ(stats.ranges_unsampled, 0u);
}

TEST(PlanSamplesTest, BudgetGoesToTheSmallestRangesAndUnreadableRangesAreSkipped) {
  ScanOptions o;
  o.budget_bytes = 8192 + 64;
  const std::vector<Range> ranges = {
      {0x100000, 1u << 20}, {0x300000, 64}, {0x400000, 128, false}, {0x500000, 2u << 20}};
  ScanStats stats;
  const auto plan = PlanSamples(ranges, o, &stats);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].range, 1u);
  EXPECT_EQ(plan[1].range, 0u);  // head and tail of the 1 MiB range, then the budget is gone
  EXPECT_EQ(plan[2].range, 0u);
  EXPECT_EQ(plan[2].offset, (1u << 20) - 4096);
  EXPECT_EQ(stats.ranges_sampled, 2u);
  EXPECT_EQ(stats.ranges_complete, 1u);
  EXPECT_EQ(stats.ranges_unsampled, 1u);  // the 2 MiB range; the unreadable one is not counted
}

// A "device" of three host buffers: a large one holding a table somewhere, two targets.
struct HostDevice {
  std::vector<std::uint64_t> table = std::vector<std::uint64_t>((1u << 20) / 8, 0);
  std::vector<std::uint64_t> a = std::vector<std::uint64_t>(512, 0);
  std::vector<std::uint64_t> b = std::vector<std::uint64_t>(512, 0);
  std::vector<Range> Ranges() const {
    return {{Addr(table.data()), table.size() * 8}, {Addr(a.data()), 4096}, {Addr(b.data()), 4096}};
  }
};

TEST(ScanSamplesTest, FindsTablesInSampledBytesAndMissesTablesOutsideThem) {
  HostDevice dev;
  dev.table[3] = Addr(dev.a.data()) + 16;                    // in the head: found
  dev.table[dev.table.size() / 3 + 7] = Addr(dev.b.data());  // between windows: missed
  const auto ranges = dev.Ranges();
  ScanOptions o;
  o.staging_bytes = 8192;
  std::vector<unsigned char> staging(o.staging_bytes);
  HostSource src;
  const ScanResult r = ScanSamples(ranges, o, &src, staging.data());
  EXPECT_EQ(r.error, CUDA_SUCCESS);
  ASSERT_EQ(r.targets.size(), 1u);
  EXPECT_EQ(r.targets[0], Addr(dev.a.data()));
  ASSERT_EQ(r.links.size(), 1u);
  EXPECT_EQ(r.links[0].table, 0u);
  EXPECT_EQ(r.links[0].target, 1u);
  EXPECT_EQ(r.stats.bytes_copied, 4096u * 2 + 24u * 1024);
  EXPECT_EQ(r.stats.words_scanned, r.stats.bytes_copied / 8);
  EXPECT_EQ(r.stats.batches, static_cast<std::uint64_t>(src.waits_));
  // Reading the whole table instead (a larger sample) finds both.
  o.head_bytes = 1u << 20;
  const ScanResult whole = ScanSamples(ranges, o, &src, staging.data());
  EXPECT_EQ(whole.targets.size(), 2u);
}

TEST(ScanSamplesTest, SplittingAcrossSmallBatchesLosesNoWord) {
  HostDevice dev;
  for (std::size_t i = 0; i < 512; ++i) dev.table[i] = Addr(i % 2 ? dev.a.data() : dev.b.data());
  auto ranges = dev.Ranges();
  ranges[0].bytes = 4096;  // the whole table region is read
  ScanOptions o;
  o.staging_bytes = 60;  // not a multiple of 8: batches of 56 bytes, segments split across them
  std::vector<unsigned char> staging(64);
  HostSource src;
  const ScanResult r = ScanSamples(ranges, o, &src, staging.data());
  EXPECT_EQ(r.error, CUDA_SUCCESS);
  ASSERT_EQ(r.links.size(), 2u);
  EXPECT_EQ(r.links[0].count + r.links[1].count, 512u);
  EXPECT_EQ(r.links[0].count, 256u);
  EXPECT_GT(r.stats.batches, 100u);
}

TEST(ScanSamplesTest, ACopyErrorStopsTheScanAndKeepsWhatWasFound) {
  HostDevice dev;
  dev.a[0] = Addr(dev.b.data());  // range 1 (4 KiB, sampled first) points at range 2
  const auto ranges = dev.Ranges();
  ScanOptions o;
  o.staging_bytes = 4096;  // one range per batch
  std::vector<unsigned char> staging(4096);
  HostSource src;
  src.fail_at_ = 2;  // ranges 1 and 2 copied and scanned; the table's first copy fails
  const ScanResult r = ScanSamples(ranges, o, &src, staging.data());
  EXPECT_EQ(r.error, CUDA_ERROR_ILLEGAL_ADDRESS);
  ASSERT_EQ(r.targets.size(), 1u);
  EXPECT_EQ(r.targets[0], Addr(dev.b.data()));
}

TEST(ScanSamplesTest, NothingToReadMeansNoCopies) {
  HostDevice dev;
  auto ranges = dev.Ranges();
  for (auto& r : ranges) r.scan = false;
  ScanOptions o;
  std::vector<unsigned char> staging(o.staging_bytes);
  HostSource src;
  const ScanResult r = ScanSamples(ranges, o, &src, staging.data());
  EXPECT_EQ(src.copies_, 0);
  EXPECT_EQ(src.waits_, 0);
  EXPECT_TRUE(r.targets.empty());
}

// What the daemon is told (RecordType::kPointerTargets): every tracked id, in records the ring's
// validation accepts, split at the per-record bound.
TEST(EncodePointerTargetsTest, TrackedIdsInRecordsOfAtMostTheBound) {
  EXPECT_TRUE(EncodePointerTargets(1, {}).empty());
  const std::vector<std::uint64_t> untracked = {0, 0};
  EXPECT_TRUE(EncodePointerTargets(1, untracked).empty());
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = 1; i <= ipc::kMaxPointerTargetsPerRecord + 3; ++i) {
    ids.push_back(i);
    if (i == 7) ids.push_back(0);  // a target the table does not know: left out
  }
  const auto records = EncodePointerTargets(42, ids);
  ASSERT_EQ(records.size(), 2u);
  std::vector<std::uint64_t> decoded;
  for (const auto& r : records) {
    ASSERT_EQ(ipc::ValidateRecord(ipc::RecordType::kPointerTargets, r), ipc::DrainError::kNone);
    ipc::PointerTargetsRecord head{};
    std::memcpy(&head, r.data(), sizeof(head));
    EXPECT_EQ(head.scan, 42u);
    EXPECT_LE(head.count, ipc::kMaxPointerTargetsPerRecord);
    ASSERT_EQ(r.size(), sizeof(head) + head.count * 8u);
    for (std::uint32_t k = 0; k < head.count; ++k) {
      std::uint64_t id;
      std::memcpy(&id, r.data() + sizeof(head) + k * 8u, sizeof(id));
      decoded.push_back(id);
    }
  }
  std::vector<std::uint64_t> expected;
  for (std::uint64_t i = 1; i <= ipc::kMaxPointerTargetsPerRecord + 3; ++i) expected.push_back(i);
  EXPECT_EQ(decoded, expected);
}

}  // namespace
}  // namespace chameleon::shim::swap
