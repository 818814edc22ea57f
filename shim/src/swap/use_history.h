// UseHistory: the op positions at which each allocation was used in the previous iteration, so
// that the safety net can evict by the farthest next use (Belady over the recorded sequence)
// instead of by size.
//
// Recording (Record) is the launch path's part: relaxed loads and stores into a fixed array, no
// read-modify-write, no lock, no allocation. Two logs alternate: Close, at an iteration
// boundary, only makes the one being written the previous iteration's and starts the other (each
// entry carries its iteration's tag, so nothing is cleared). The previous log is turned into
// per-allocation use lists lazily, at the first NextUse after a Close: only iterations in which
// the safety net evicts pay for it — with a policy in force that prefetches, none does, and a
// boundary costs a few stores instead of a hash-map insertion per recorded use (shim_bench's
// BM_LaunchShimPolicy: ~150 k instructions per 1,000-op iteration before). The lists are keyed so
// that the next iteration's allocations find their counterparts: allocation ids are handed out in
// order (AllocationTable), so an allocation made in the iteration is keyed by its ordinal among
// that iteration's allocations (the trainer's k-th activation of a step is the next step's k-th),
// one made in the iteration before by its ordinal there (age 1), and an older one (weights,
// optimizer state) by its id.
//
// The two logs (1 MiB each) are anonymous mappings, read as zeroes until written: constructing
// them used to write both whole, 0.6 ms of a process's first allocation (the executor is built
// there) and most of its cost under 64 processes starting at once (bench/shim/first_alloc_bench).
// Only the pages an iteration's uses reach are ever touched. Entries are plain integers accessed
// through std::atomic_ref, so that zeroed memory is valid entries without a constructor's pass.
//
// Thread-safety: Record may be called from any thread, concurrently with itself (two at once may
// overwrite or lose each other's entries); everything else by one thread at a time (the engine's
// mutex). A Record racing with Close may be lost or land in the other log (the history is advice:
// a lost use makes one eviction choice worse, never wrong).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "swap/allocation_table.h"

namespace chameleon::shim::swap {

class UseHistory {
 public:
  /// Log entries per iteration; uses beyond it are not recorded (the iteration then counts as
  /// not known, and eviction falls back to the closest-size rule).
  static constexpr std::uint32_t kCapacity = 1u << 16;
  /// NextUse of an allocation without a known next use in the history.
  static constexpr std::uint64_t kUnknown = ~0ull;

  UseHistory();
  ~UseHistory();
  UseHistory(const UseHistory&) = delete;
  UseHistory& operator=(const UseHistory&) = delete;

  /// The op at `position` (0-based from the boundary) uses the `n` allocations `ids` (0 = not
  /// the engine's, skipped). Lock-free; see the class comment.
  void Record(std::uint32_t position, const AllocId* ids, std::uint32_t n) {
    const std::uint32_t tag = tag_.load(std::memory_order_relaxed);
    Entry* const log = logs_[tag & 1];
    // A load and a store, not a fetch_add: the locked add was ~10 % of a launch's cost in the
    // shim (shim_bench, perf). Threads recording at once may then write the same entries or
    // lose a few, which only blurs the advice (as for the executor's op position).
    const std::uint32_t at = used_.load(std::memory_order_relaxed);
    used_.store(at + n, std::memory_order_relaxed);
    if (at >= kCapacity || n > kCapacity - at || log == nullptr) {
      overflow_.store(true, std::memory_order_relaxed);
      return;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      std::atomic_ref(log[at + i].position).store(position, std::memory_order_relaxed);
      std::atomic_ref(log[at + i].tag).store(tag, std::memory_order_relaxed);
      std::atomic_ref(log[at + i].id).store(ids[i], std::memory_order_relaxed);
    }
  }

  /// Closes the iteration that ran `ops` ops; `next_id` is the id the next allocation will get
  /// (the first of the iteration that starts now).
  void Close(std::uint32_t ops, AllocId next_id);

  /// Closes an iteration that was not recorded (the executor pauses recording while a policy
  /// runs without evicting: docs/executor.md, "The recorded sequence"). The log NextUse reads stays
  /// the last recorded one, standing for the iteration that just ended (a steady loop repeats it:
  /// its allocations have the same ordinals); only the ids the keys count from move on.
  void Skip(std::uint32_t ops, AllocId next_id);

  /// True when the previous iteration was recorded whole (Close ran at least twice: the first
  /// boundary only opens the first recorded iteration).
  bool known() const { return known_; }
  /// The next position (in the current iteration's numbering; >= ops of the previous iteration
  /// when it wraps into the next one) at which allocation `id` is used after `now`, by the
  /// previous iteration's record; kUnknown when it has none. Requires known(). The first call
  /// after a Close builds the per-allocation lists (O(uses of that iteration)).
  std::uint64_t NextUse(AllocId id, std::uint32_t now);

 private:
  struct Entry {  // all zero: no iteration's (tag_ starts at 1)
    std::uint32_t position;
    std::uint32_t tag;  ///< tag_ of the iteration that wrote it
    AllocId id;
  };
  static_assert(sizeof(Entry) == 16, "a log entry is two words");
  static_assert(std::atomic_ref<AllocId>::required_alignment <= alignof(AllocId) &&
                    std::atomic_ref<std::uint32_t>::required_alignment <= alignof(std::uint32_t),
                "entries are accessed in place through atomic_ref");
  static constexpr std::size_t kLogBytes = sizeof(Entry) * kCapacity;
  /// The key of allocation `id` in an iteration whose first allocation id is `first`, with
  /// `before` the first id of the iteration before it.
  static std::uint64_t Key(AllocId id, AllocId first, AllocId before);
  /// Turns the previous log (tag_ - 1, `previous_n_` entries) into `previous_`.
  void BuildPrevious();

  /// Two logs: the current iteration's is logs_[tag_ & 1], the previous one's the other.
  Entry* logs_[2] = {nullptr, nullptr};  // kCapacity each, mmap'ed; null if the mapping failed
  /// The current iteration's tag (starts at 1, so a zeroed entry is no iteration's).
  std::atomic<std::uint32_t> tag_{1};
  std::atomic<std::uint32_t> used_{0};
  std::atomic<bool> overflow_{false};
  // Owned by the thread holding the engine's mutex:
  std::uint32_t previous_n_ = 0;  ///< entries of the previous log
  AllocId previous_first_ = 0;    ///< first_ and before_ while the previous log was written
  AllocId previous_before_ = 0;
  bool previous_built_ = true;  ///< previous_ reflects the previous log
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> previous_;  // key -> positions
  std::uint32_t previous_ops_ = 0;
  AllocId first_ = 0;   ///< first allocation id of the current iteration (0: none opened yet)
  AllocId before_ = 0;  ///< ... of the iteration before it
  bool known_ = false;
};

}  // namespace chameleon::shim::swap
