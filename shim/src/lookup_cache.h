// A thread's cache in front of AllocationTable::Lookup, for the op paths (issue 18, item 5: the
// launch path's cost with a daemon connected).
//
// Why. The table's lookup (hash to a shard, sequence lock, binary search with acquire loads, the
// sequence again) was the largest single part of a launch under the shim: removing the two
// lookups of shim_bench's launch took 17-23 ns off 41-54 ns. A training loop launches kernels on
// a handful of long-lived allocations (a caching allocator's segments) between rare allocation
// calls, so the answer for an address is almost always the one the same thread got last time.
//
// Design. Direct-mapped: an address picks a slot by its 2 MiB granule (a slot holds the whole
// allocation's range, so any address inside it hits). A slot is valid while the table's version
// (AllocationTable::version(): changed by every insert and removal, unique across tables) is the
// one it was filled under. The caller loads the version once per op, before any lookup, and
// passes it in: a fill is then tagged with a version no newer than the data it holds, so a slot
// never outlives a change it did not see. A hit answers what the table answered at some point
// after that load, as a racing Lookup does. Only tracked addresses are cached; the rest go to
// the table every time (a miss for an untracked value costs one compare more than before).
//
// Thread-safety: one instance per thread (ThreadLookupCache below), no shared state; the table's
// own guarantees cover the fills.
#pragma once

#include <cstdint>
#include <mutex>

#include "alloc_table.h"

namespace chameleon::shim {

class LookupCache {
 public:
  static constexpr std::uint32_t kSlots = 64;
  static constexpr int kGranuleShift = 21;  // 2 MiB: a caching allocator's smallest segment

  /// The table's answer for `address`; `version` is table.version(), loaded by the caller before
  /// this op's first lookup.
  [[gnu::always_inline]] AllocationHit Lookup(const AllocationTable& table, std::uint64_t version,
                                              std::uint64_t address) {
    Slot& s = slots_[SlotOf(address)];
    if (s.version == version && address - s.start < s.bytes) {
      AllocationHit hit;
      hit.id = s.id;
      hit.device = s.device;
      hit.state = s.state;
      hit.start = s.start;
      hit.end = s.start + s.bytes;
      return hit;
    }
    return Fill(table, version, address, &s);
  }

  /// Forgets every slot (a recycled cache, handed to a new thread).
  void Clear() {
    for (Slot& s : slots_) s.version = 0;
  }
  /// Lookups the table answered (each one that did not hit a slot). Per thread, for tests.
  std::uint64_t misses() const { return misses_; }

 private:
  struct Slot {
    std::uint64_t version = 0;  ///< 0: empty (tables' versions start at 1)
    std::uint64_t start = 0;
    std::uint64_t bytes = 0;
    std::uint64_t id = 0;
    AllocationState* state = nullptr;
    std::uint16_t device = 0;
  };
  static std::uint32_t SlotOf(std::uint64_t address) { return Bucket64(address >> kGranuleShift); }
  static_assert(kSlots == 64, "SlotOf picks one of Bucket64's 64 buckets");

  AllocationHit Fill(const AllocationTable& table, std::uint64_t version, std::uint64_t address,
                     Slot* s) {
    ++misses_;
    const AllocationHit hit = table.Lookup(address);
    if (hit.id != 0 && hit.end > hit.start) {
      *s = Slot{version, hit.start, hit.end - hit.start, hit.id, hit.state, hit.device};
    }
    return hit;
  }

  Slot slots_[kSlots];
  std::uint64_t misses_ = 0;
};

/// This thread's cache (initial-exec TLS: one register-relative load on the launch path).
extern __thread LookupCache* t_lookup_cache __attribute__((tls_model("initial-exec")));
/// Slow path: gives the thread a cache (a recycled one from an exited thread, cleared, or a new
/// one); returned to the pool when the thread exits.
LookupCache* AcquireThreadLookupCache();
/// The pool's mutex, for the fork handlers only (Runtime::LockForFork).
std::mutex& LookupCachePoolMutex();

[[gnu::always_inline]] inline LookupCache& ThreadLookupCache() {
  LookupCache* c = t_lookup_cache;
  if (__builtin_expect(c == nullptr, 0)) c = AcquireThreadLookupCache();
  return *c;
}

}  // namespace chameleon::shim
