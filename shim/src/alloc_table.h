// The shim's table of live device allocations, looked up by any address inside a range on every
// launch and copy.
//
// Design. Readers (launch/copy hot path) must not lock, allocate or make syscalls; writers
// (allocation calls) are rare next to launches. Address space is cut into 1 GiB regions hashed to
// kShards shards; an allocation is entered in every shard its regions map to. Each shard is a
// sorted array in a reserved, never-freed mapping, guarded by a sequence lock: a writer (all
// writers are serialised by one mutex) makes the sequence odd, edits in place with release atomic
// stores, and makes it even again; a reader binary-searches with acquire atomic loads (all plain
// moves on x86) and retries
// when the sequence changed. A reader that keeps losing (a writer preempted mid-edit) gives up
// after a few tries and reports "not tracked" (counted): the hot path stays bounded and never
// waits for a writer. Memory is type-stable (never unmapped), so a racing reader can read stale
// values but never freed memory; the sequence check discards them.
//
// Per-allocation state (AllocationState) lives in a type-stable pool; the swap executor mirrors
// residency bits into its `flags` word, which the launch path tests with one load.
//
// Thread-safety: Lookup is wait-free-bounded and callable from any thread; Insert/Remove/Mark*
// take the writer mutex.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "swap/allocation_flags.h"

namespace chameleon::shim {

inline constexpr std::uint32_t kMaxDevices = 64;

/// What the shim knows about one live allocation. Pool-allocated and recycled, never freed.
struct AllocationState {
  std::uint64_t id = 0;  ///< AllocRecord id (monotonic from 1, never reused)
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::uint64_t stream = 0;  ///< stream of an async allocation
  std::uint16_t device = 0;
  std::uint8_t kind = 0;                ///< ipc::AllocKind
  std::atomic<std::uint32_t> flags{0};  ///< AllocationFlag bits
  /// The swap executor's AllocId for this allocation (reinterpret_cast), null when the
  /// allocation was passed through to the driver.
  std::atomic<void*> executor_slot{nullptr};
  /// Stream of the last op that named it, as told to the executor (warm-up eviction fences).
  std::atomic<std::uint64_t> last_stream{0};
};

/// The swap executor's AllocId for `s` (swap::AllocId, a std::uint64_t): 0 when the allocation
/// was passed through to the driver. Acquire: pairs with the release store that publishes it.
inline std::uint64_t IdOf(const AllocationState* s) {
  return static_cast<std::uint64_t>(
      reinterpret_cast<std::uintptr_t>(s->executor_slot.load(std::memory_order_acquire)));
}

/// Result of a hot-path lookup.
struct AllocationHit {
  std::uint64_t id = 0;  ///< 0 = not a tracked allocation
  std::uint16_t device = 0;
  AllocationState* state = nullptr;
  std::uint64_t start = 0;  ///< the allocation's range [start, end) (for LookupCache)
  std::uint64_t end = 0;
};

/// One of 64 buckets for `key` (Fibonacci hashing: the top 6 bits of key × 2^64/φ), which
/// spreads consecutive keys (regions, granules) over all buckets.
inline std::uint32_t Bucket64(std::uint64_t key) {
  return static_cast<std::uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 58);
}

class AllocationTable {
 public:
  static constexpr std::uint32_t kShards = 64;
  static constexpr std::uint32_t kShardCapacity = 1u << 16;
  static constexpr int kRegionShift = 30;

  AllocationTable();
  /// Frees everything. Only for tables nobody can still read (tests): the shim's own table lives
  /// as long as the process, which is what keeps its memory type-stable for racing readers.
  ~AllocationTable();
  AllocationTable(const AllocationTable&) = delete;
  AllocationTable& operator=(const AllocationTable&) = delete;

  /// Hot path: the allocation containing `address`. Bounded; no locks, allocation or syscalls.
  AllocationHit Lookup(std::uint64_t address) const;

  /// Registers [address, address + bytes). False when a shard is full (the allocation then stays
  /// untracked; counted). `state` must come from NewState().
  bool Insert(AllocationState* state);
  /// Removes the allocation that starts exactly at `address`; returns its state (to be recycled
  /// with Recycle once the caller has used it) or null if unknown.
  AllocationState* Remove(std::uint64_t address);
  /// Removes every allocation starting inside [begin, end) (cuMemUnmap of a range).
  void RemoveRange(std::uint64_t begin, std::uint64_t end, std::vector<AllocationState*>* removed);

  AllocationState* NewState();
  void Recycle(AllocationState* state);

  /// Calls fn(const AllocationState&) for each live allocation, in address order, under the
  /// writer lock (slow path: used to re-announce allocations to a new daemon).
  template <typename Fn>
  void ForEach(Fn&& fn);
  /// Runs fn() under the writer lock (the caller needs "no allocation changes meanwhile").
  template <typename Fn>
  void WithWriterLock(Fn&& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    fn();
  }
  /// Forgets everything (fork child). Caller guarantees no concurrent use.
  void ClearForChild();

  /// Changes whenever an entry is added or removed (after the edit), and no two tables ever
  /// share a value: a LookupCache slot filled under one version is valid while it reads the same.
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }

  std::uint64_t lookup_give_ups() const { return give_ups_.load(std::memory_order_relaxed); }
  std::uint64_t insert_failures() const { return insert_failures_.load(std::memory_order_relaxed); }
  std::uint64_t live_count() const { return live_count_; }

  std::mutex& writer_mutex() { return mu_; }

 private:
  struct Entry {
    std::atomic<std::uint64_t> start;
    std::atomic<std::uint64_t> end;
    std::atomic<std::uint64_t> info;  // (id << 16) | device: read before the sequence check
    std::atomic<AllocationState*> state;
  };
  struct alignas(64) Shard {
    std::atomic<std::uint64_t> seq{0};
    std::atomic<std::uint32_t> count{0};
    Entry* entries = nullptr;
  };

  static constexpr int kLookupTries = 8;
  static void Pause() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  static std::uint32_t ShardOf(std::uint64_t region) { return Bucket64(region); }
  static_assert(kShards == 64, "ShardOf picks one of Bucket64's 64 buckets");
  static std::uint64_t NextVersion();
  void BumpVersion() { version_.store(NextVersion(), std::memory_order_release); }
  bool InsertInShard(Shard* shard, AllocationState* state);
  void RemoveFromShard(Shard* shard, std::uint64_t start);
  template <typename Fn>
  void ForEachShardOf(std::uint64_t begin, std::uint64_t end, Fn&& fn);

  Shard shards_[kShards];
  std::mutex mu_;
  std::vector<AllocationState*> free_states_;  // guarded by mu_
  std::vector<AllocationState*> all_states_;   // guarded by mu_; owned, freed by the destructor
  std::uint64_t live_count_ = 0;               // guarded by mu_
  mutable std::atomic<std::uint64_t> give_ups_{0};
  std::atomic<std::uint64_t> insert_failures_{0};
  std::atomic<std::uint64_t> version_{NextVersion()};
};

inline AllocationHit AllocationTable::Lookup(std::uint64_t address) const {
  const Shard& shard = shards_[ShardOf(address >> kRegionShift)];
  for (int attempt = 0; attempt < kLookupTries; ++attempt) {
    const std::uint64_t s1 = shard.seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      Pause();
      continue;
    }
    std::uint32_t lo = 0;
    std::uint32_t hi = shard.count.load(std::memory_order_acquire);
    if (hi > kShardCapacity) hi = kShardCapacity;
    // Last entry whose start <= address.
    while (lo < hi) {
      const std::uint32_t mid = (lo + hi) / 2;
      if (shard.entries[mid].start.load(std::memory_order_acquire) <= address) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    AllocationHit hit;
    if (lo > 0) {
      const Entry& e = shard.entries[lo - 1];
      if (address < e.end.load(std::memory_order_acquire)) {
        const std::uint64_t info = e.info.load(std::memory_order_acquire);
        hit.id = info >> 16;
        hit.device = static_cast<std::uint16_t>(info & 0xffffu);
        hit.state = e.state.load(std::memory_order_acquire);
        hit.start = e.start.load(std::memory_order_acquire);
        hit.end = e.end.load(std::memory_order_acquire);
      }
    }
    // Everything above came from the entry itself, with acquire loads (plain moves on x86), so
    // this re-read of the sequence cannot move before them: if a writer touched any of it, the
    // sequence differs. (Reading the state's own fields instead could see a recycled state.)
    if (shard.seq.load(std::memory_order_relaxed) != s1) continue;
    return hit;
  }
  give_ups_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

template <typename Fn>
void AllocationTable::ForEachShardOf(std::uint64_t begin, std::uint64_t end, Fn&& fn) {
  // Visit each distinct shard touched by the regions of [begin, end) once.
  std::uint64_t seen = 0;  // kShards == 64: one bit per shard
  const std::uint64_t last = (end - 1) >> kRegionShift;
  for (std::uint64_t r = begin >> kRegionShift; r <= last; ++r) {
    const std::uint32_t s = ShardOf(r);
    if (seen & (1ull << s)) {
      if (seen == ~0ull) break;
      continue;
    }
    seen |= 1ull << s;
    fn(&shards_[s]);
    if (seen == ~0ull) break;
  }
}

template <typename Fn>
void AllocationTable::ForEach(Fn&& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  // An allocation lives in the shard of its first region (and maybe others): report it from the
  // shard of its first region only, so each appears once.
  std::vector<const AllocationState*> states;
  for (Shard& shard : shards_) {
    const std::uint32_t n = shard.count.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < n; ++i) {
      const AllocationState* s = shard.entries[i].state.load(std::memory_order_relaxed);
      if (&shards_[ShardOf(s->address >> kRegionShift)] == &shard) states.push_back(s);
    }
  }
  // Announce in id order: the order the allocations became live.
  std::sort(states.begin(), states.end(),
            [](const AllocationState* a, const AllocationState* b) { return a->id < b->id; });
  for (const AllocationState* s : states) fn(*s);
}

}  // namespace chameleon::shim
