// AllocationTable: ids are never reused, addresses find the allocation whose span holds them,
// a conditional unindex spares another allocation's entry, and flags mirror residency.
#include "swap/allocation_table.h"

#include <gtest/gtest.h>

namespace swap_test {
namespace {

namespace sw = chameleon::shim::swap;

TEST(AllocationTable, ShouldFindAnAddressOnlyInsideASpan) {
  sw::AllocationTable t;
  sw::Allocation* a = t.Add(0x10000, 100, 0x2000);
  sw::Allocation* b = t.Add(0x20000, 0x1000, 0x1000);
  EXPECT_EQ(t.Find(0x10000), a->id);
  EXPECT_EQ(t.Find(0x11fff), a->id);
  EXPECT_EQ(t.Find(0x12000), 0u);  // between the spans
  EXPECT_EQ(t.Find(0x0ffff), 0u);
  EXPECT_EQ(t.Find(0x20fff), b->id);
  EXPECT_EQ(t.Find(0x21000), 0u);
}

TEST(AllocationTable, ShouldNeverReuseAnIdAfterErase) {
  sw::AllocationTable t;
  const sw::AllocId first = t.Add(0x10000, 1, 0x1000)->id;
  t.Unindex(0x10000);
  t.Erase(first);
  EXPECT_EQ(t.Get(first), nullptr);
  const sw::AllocId second = t.Add(0x10000, 1, 0x1000)->id;
  EXPECT_GT(second, first);
  EXPECT_EQ(t.Get(first), nullptr);  // a stale id finds nothing
  EXPECT_EQ(t.Find(0x10000), second);
  EXPECT_EQ(t.size(), 1u);
}

TEST(AllocationTable, ShouldKeepAnotherAllocationsEntryOnConditionalUnindex) {
  sw::AllocationTable t;
  const sw::AllocId old_id = t.Add(0x10000, 1, 0x1000)->id;
  const sw::AllocId new_id = t.Add(0x10000, 1, 0x1000)->id;  // the VA serves someone else now
  t.UnindexIf(0x10000, old_id);
  EXPECT_EQ(t.Find(0x10000), new_id);
  t.UnindexIf(0x10000, new_id);
  EXPECT_EQ(t.Find(0x10000), 0u);
  EXPECT_NE(t.Get(old_id), nullptr);  // records stay until erased
}

TEST(AllocationTable, ShouldMirrorResidencyIntoTheFlagsWordKeepingOtherBits) {
  std::atomic<std::uint32_t> flags{1u};  // the shim's own bit 0 (kNeverSwap)
  sw::Allocation a;
  a.flags = &flags;
  sw::MirrorFlags(a);
  EXPECT_EQ(flags.load(), 1u);
  a.state = sw::Residency::kSwappedOut;
  sw::MirrorFlags(a);
  EXPECT_EQ(flags.load(), 1u | chameleon::shim::kSwappedOut);
  sw::Fence ready;
  a.state = sw::Residency::kResident;
  a.ready = &ready;  // a swap-in in flight
  sw::MirrorFlags(a);
  EXPECT_EQ(flags.load(), 1u | chameleon::shim::kSwapInFlight);
  a.ready = nullptr;
  sw::MirrorFlags(a);
  EXPECT_EQ(flags.load(), 1u);
}

}  // namespace
}  // namespace swap_test
