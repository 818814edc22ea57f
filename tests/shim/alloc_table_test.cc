// The allocation table: range lookups, multi-region allocations, removal, and lookups racing
// with writers (run under TSan via the `concurrent` label).
#include "alloc_table.h"

#include <gtest/gtest.h>

#include <vector>

#include "alloc_table_testing.h"

namespace chameleon::shim {
namespace {

using testing::AddAllocation;
using testing::kStableId;
using testing::RaceReadersAgainstChurn;

AllocationState* Add(AllocationTable& t, std::uint64_t id, std::uint64_t address,
                     std::uint64_t bytes, std::uint16_t device = 0) {
  return AddAllocation(t, id, address, bytes, device);
}

TEST(AllocationTableTest, FindsInteriorAddressesAndNothingOutside) {
  AllocationTable t;
  Add(t, 1, 0x7f0000001000, 4096, 3);
  Add(t, 2, 0x7f0000010000, 1 << 20);
  EXPECT_EQ(t.Lookup(0x7f0000001000).id, 1u);
  EXPECT_EQ(t.Lookup(0x7f0000001fff).id, 1u);
  EXPECT_EQ(t.Lookup(0x7f0000001000).device, 3u);
  EXPECT_EQ(t.Lookup(0x7f0000002000).id, 0u);
  EXPECT_EQ(t.Lookup(0x7f0000000fff).id, 0u);
  EXPECT_EQ(t.Lookup(0x7f0000010000 + (1 << 20) - 1).id, 2u);
  EXPECT_EQ(t.Lookup(0x7f0000010000 + (1 << 20)).id, 0u);
  EXPECT_EQ(t.live_count(), 2u);
}

TEST(AllocationTableTest, AllocationSpanningManyRegionsIsFoundEverywhere) {
  AllocationTable t;
  const std::uint64_t base = 0x7e0000000000;
  const std::uint64_t bytes = 5ull << 30;  // five 1 GiB regions
  Add(t, 7, base + 123, bytes);
  for (std::uint64_t off = 0; off < bytes; off += 256ull << 20) {
    EXPECT_EQ(t.Lookup(base + 123 + off).id, 7u) << off;
  }
  EXPECT_EQ(t.Lookup(base + 123 + bytes).id, 0u);
  AllocationState* s = t.Remove(base + 123);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->id, 7u);
  for (std::uint64_t off = 0; off < bytes; off += 256ull << 20) {
    EXPECT_EQ(t.Lookup(base + 123 + off).id, 0u) << off;
  }
}

TEST(AllocationTableTest, RemoveRangeTakesEveryAllocationStartingInside) {
  AllocationTable t;
  Add(t, 1, 0x10000000, 0x1000);
  Add(t, 2, 0x10001000, 0x1000);
  Add(t, 3, 0x10002000, 0x1000);
  std::vector<AllocationState*> removed;
  t.RemoveRange(0x10000000, 0x10002000, &removed);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0]->id, 1u);
  EXPECT_EQ(removed[1]->id, 2u);
  EXPECT_EQ(t.Lookup(0x10000800).id, 0u);
  EXPECT_EQ(t.Lookup(0x10002800).id, 3u);
  EXPECT_EQ(t.Remove(0x12345678), nullptr);
}

TEST(AllocationTableTest, ReadersRacingWritersNeverSeeAWrongAllocation) {
  AllocationTable t;
  // A stable allocation readers look up while a writer churns its neighbour.
  Add(t, kStableId, 0x20000000, 0x1000);
  const testing::RaceOutcome seen = RaceReadersAgainstChurn(t, 0x20000800, 0x20001800, [&] {
    return [&](std::uint64_t address) { return t.Lookup(address); };
  });
  EXPECT_EQ(seen.wrong, 0u);
  // A reader may give up while a writer holds the shard, but lookups do succeed meanwhile.
  EXPECT_GE(seen.found, 1000u);
}

}  // namespace
}  // namespace chameleon::shim
