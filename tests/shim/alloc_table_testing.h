// Helpers shared by the allocation table's tests and its lookup cache's: entering an allocation,
// and readers racing a writer that churns a neighbouring allocation.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "alloc_table.h"

namespace chameleon::shim::testing {

inline AllocationState* AddAllocation(AllocationTable& t, std::uint64_t id, std::uint64_t address,
                                      std::uint64_t bytes, std::uint16_t device = 0) {
  AllocationState* s = t.NewState();
  s->id = id;
  s->address = address;
  s->bytes = bytes;
  s->device = device;
  EXPECT_TRUE(t.Insert(s));
  return s;
}

/// What the readers of RaceReadersAgainstChurn saw.
struct RaceOutcome {
  std::uint64_t wrong = 0;  ///< answers naming an allocation that is not at that address
  std::uint64_t found = 0;  ///< lookups of the stable allocation that found it
};

/// Allocation kStableId lives at `stable`; two reader threads look it up, and `churned`, while
/// this thread adds and removes allocations (ids below kStableId) of 4 KiB at `churned`, until
/// the readers have overlapped with it for a while (they may start late on a loaded machine).
/// `make_lookup()` runs on each reader thread and returns its lookup: address -> AllocationHit.
inline constexpr std::uint64_t kStableId = 1000000;
template <typename MakeLookup>
RaceOutcome RaceReadersAgainstChurn(AllocationTable& t, std::uint64_t stable, std::uint64_t churned,
                                    MakeLookup make_lookup) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> wrong{0};
  std::atomic<std::uint64_t> found{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      auto lookup = make_lookup();
      while (!stop.load(std::memory_order_relaxed)) {
        const AllocationHit hit = lookup(stable);
        if (hit.id == kStableId) {
          found.fetch_add(1, std::memory_order_relaxed);
        } else if (hit.id != 0) {
          wrong.fetch_add(1, std::memory_order_relaxed);
        }
        if (lookup(churned).id >= kStableId) wrong.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (std::uint64_t i = 1; i <= 20000 || (found.load() < 1000 && i < 900000); ++i) {
    AddAllocation(t, i, churned & ~std::uint64_t{0xfff}, 0x1000);
    AllocationState* s = t.Remove(churned & ~std::uint64_t{0xfff});
    EXPECT_NE(s, nullptr);
    if (s == nullptr) break;
    t.Recycle(s);
  }
  stop.store(true);
  for (auto& th : readers) th.join();
  return {wrong.load(), found.load()};
}

}  // namespace chameleon::shim::testing
