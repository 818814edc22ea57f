// The thread's lookup cache in front of the allocation table (shim/src/lookup_cache.h): it
// answers as the table does, asks the table once per allocation while nothing changes, never
// answers from before a change it was told of, keeps tables apart, and is reused across threads.
#include "lookup_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "alloc_table_testing.h"

namespace chameleon::shim {
namespace {

AllocationState* Add(AllocationTable& t, std::uint64_t id, std::uint64_t address,
                     std::uint64_t bytes) {
  return testing::AddAllocation(t, id, address, bytes);
}

constexpr std::uint64_t kBase = 0x7f0000000000ull;

TEST(LookupCacheTest, ShouldAnswerAsTheTableAndAskItOncePerAllocation) {
  AllocationTable t;
  AllocationState* a = Add(t, 7, kBase, 64u << 20);
  LookupCache cache;
  const std::uint64_t v = t.version();
  const AllocationHit first = cache.Lookup(t, v, kBase + 4096);
  EXPECT_EQ(first.id, 7u);
  EXPECT_EQ(first.state, a);
  EXPECT_EQ(first.start, kBase);
  EXPECT_EQ(first.end, kBase + (64u << 20));
  // The same granule, then another granule of the same allocation (its own slot: one more ask).
  EXPECT_EQ(cache.Lookup(t, v, kBase + 128).id, 7u);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.Lookup(t, v, kBase + (40u << 20)).id, 7u);
  EXPECT_EQ(cache.Lookup(t, v, kBase + (40u << 20) + 8).id, 7u);
  EXPECT_EQ(cache.misses(), 2u);
  // Past the end: not the allocation, whatever the slot holds.
  EXPECT_EQ(cache.Lookup(t, v, kBase + (64u << 20)).id, 0u);
}

TEST(LookupCacheTest, ShouldAskTheTableAgainAfterARemovalAndSeeTheNewAllocation) {
  AllocationTable t;
  Add(t, 1, kBase, 1u << 20);
  LookupCache cache;
  const std::uint64_t before = t.version();
  ASSERT_EQ(cache.Lookup(t, before, kBase + 64).id, 1u);
  AllocationState* gone = t.Remove(kBase);
  ASSERT_NE(gone, nullptr);
  t.Recycle(gone);
  const std::uint64_t after_remove = t.version();
  EXPECT_NE(after_remove, before);
  EXPECT_EQ(cache.Lookup(t, after_remove, kBase + 64).id, 0u);
  Add(t, 2, kBase, 1u << 20);  // the same range, a new allocation
  EXPECT_EQ(cache.Lookup(t, t.version(), kBase + 64).id, 2u);
  EXPECT_EQ(cache.misses(), 3u);
}

TEST(LookupCacheTest, ShouldCacheOnlyTrackedAddresses) {
  AllocationTable t;
  Add(t, 1, kBase, 1u << 20);
  LookupCache cache;
  const std::uint64_t v = t.version();
  EXPECT_EQ(cache.Lookup(t, v, kBase + (8u << 20)).id, 0u);
  EXPECT_EQ(cache.Lookup(t, v, kBase + (8u << 20)).id, 0u);
  EXPECT_EQ(cache.misses(), 2u);
}

TEST(LookupCacheTest, ShouldKeepTwoTablesApart) {
  // Two tables never share a version, so a slot filled from one never answers for the other.
  AllocationTable one;
  AllocationTable two;
  Add(one, 1, kBase, 1u << 20);
  Add(two, 2, kBase, 1u << 20);
  EXPECT_NE(one.version(), two.version());
  LookupCache cache;
  EXPECT_EQ(cache.Lookup(one, one.version(), kBase).id, 1u);
  EXPECT_EQ(cache.Lookup(two, two.version(), kBase).id, 2u);
  EXPECT_EQ(cache.Lookup(one, one.version(), kBase).id, 1u);
}

TEST(LookupCacheTest, ReadersRacingWritersNeverSeeAWrongAllocation) {
  AllocationTable t;
  // Stable, next to the churned neighbour in its 2 MiB granule: the two share a slot.
  Add(t, testing::kStableId, kBase, 1u << 20);
  const testing::RaceOutcome seen =
      testing::RaceReadersAgainstChurn(t, kBase + 0x800, kBase + (1u << 20) + 0x800, [&] {
        return [&t, &cache = ThreadLookupCache()](std::uint64_t address) {
          return cache.Lookup(t, t.version(), address);
        };
      });
  EXPECT_EQ(seen.wrong, 0u);
  EXPECT_GE(seen.found, 1000u);
}

TEST(LookupCacheTest, ShouldHandAnExitedThreadsCacheToTheNextThreadCleared) {
  AllocationTable t;
  Add(t, 1, kBase, 1u << 20);
  const std::uint64_t v = t.version();
  std::set<const LookupCache*> caches;
  std::uint64_t answered_from_stale_slots = 0;
  for (int i = 0; i < 32; ++i) {
    std::thread([&] {
      LookupCache& cache = ThreadLookupCache();
      caches.insert(&cache);
      const std::uint64_t misses = cache.misses();
      EXPECT_EQ(cache.Lookup(t, v, kBase).id, 1u);
      // A recycled cache starts empty: the first lookup asks the table.
      if (cache.misses() == misses) ++answered_from_stale_slots;
    }).join();
  }
  EXPECT_EQ(answered_from_stale_slots, 0u);
  // One thread alive at a time: the pool hands the same few caches round (the test binary's
  // other threads may have left some in it).
  EXPECT_LE(caches.size(), 4u);
}

}  // namespace
}  // namespace chameleon::shim
