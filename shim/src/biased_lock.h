// The event ring's producer lock, biased towards the thread that launches.
//
// Why: an uncontended SpinLock costs one locked exchange per op, and that exchange waits for
// every store the launch made before it to drain: ~20 % of a launch under a policy (perf,
// docs/benchmarks.md). Launches come in long runs from one thread (PyTorch: forward on the
// caller, backward on the autograd thread, about two handovers a step), so the lock is lent to
// the thread that took it kBiasAfter times in a row: that thread enters with two plain stores
// and a load. Any other thread first takes the inner SpinLock, then revokes the bias: it clears
// the owner, runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) — every running thread of the
// process passes a full barrier, so the owner either had its busy flag visible before the call
// returned or sees the cleared owner on its next entry — and waits for the busy flag to drop.
// (The asymmetric Dekker of userspace RCU and folly's asymmetric fences.) Threads that take the
// lock in turn never build a run and pay the SpinLock alone. The pattern that costs most is a
// second thread taking the lock once every ~kBiasAfter ops of the first: a membarrier (a few
// microseconds) each time. Without membarrier (old kernels, seccomp) the lock is never biased,
// and the tests check that mode too. Thread-safe; Lock/Unlock pair on one thread.
//
// A bounded try fails only against another bounded try (launching threads contending: the caller
// drops its record, docs/shim.md "Limits"). Behind a Lock() holder (allocation, free and sync
// records, the daemon client's thread setting a policy's boundary) or a revocation in progress —
// which holds the inner lock across a system call that may reschedule the revoker, far longer
// than a bounded try spins — it waits: a launch record must never be lost because a policy
// arrived.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "spin_lock.h"

namespace chameleon::shim {

class BiasedLock {
 public:
  /// Consecutive inner-lock acquisitions by one thread after which it becomes the owner.
  static constexpr std::uint32_t kBiasAfter = 64;

  /// The heavy side of the asymmetric fence (membarrier); tests pass a slower one.
  using HeavyBarrier = bool (*)(void* context);

  BiasedLock();
  BiasedLock(HeavyBarrier barrier, void* context);

  /// Hot path: true when acquired within `spins` attempts at the inner lock (the owner always
  /// enters at once); a Lock() caller or a revocation in the way is waited for, however long.
  bool TryLockBounded(int spins = 512) {
    if (TryOwnerEnter()) return true;
    // Read before spinning too: a slow holder may come and go within the spin.
    const std::uint64_t slow_before = slow_.load(std::memory_order_relaxed);
    if (!inner_.TryLockBounded(spins) && !WaitBehindSlowHolder(spins, slow_before)) return false;
    if (AfterInnerLocked(spins)) return true;
    EndRevocation();
    inner_.Unlock();
    return false;
  }
  /// Slow paths only (may yield the CPU).
  void Lock() {
    if (TryOwnerEnter()) return;
    slow_.fetch_add(kSlowEntry | 1, std::memory_order_relaxed);  // before it can hold anyone up
    inner_.Lock();
    while (!AfterInnerLocked(512)) sched_yield();  // an owner preempted inside
    held_slow_ = true;
  }
  void Unlock() {
    if (held_by_owner_) {
      held_by_owner_ = false;
      busy_.store(false, std::memory_order_release);
      return;
    }
    EndRevocation();  // if this holder revoked: its critical section is over too
    const bool slow = std::exchange(held_slow_, false);
    inner_.Unlock();
    if (slow) slow_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// In a fork child (one thread, no holder): back to the unbiased state; registers again.
  void ResetForChild();

  /// Whether biasing is possible here (membarrier registered).
  bool bias_enabled() const { return bias_enabled_; }
  /// Counters, read under the lock or after the threads that used it were joined.
  std::uint64_t owner_entries() const { return owner_entries_; }
  std::uint64_t revocations() const { return revocations_; }
  /// Bounded tries that met a Lock() caller or a revocation and waited (any thread, any time).
  std::uint64_t slow_holder_waits() const {
    return slow_holder_waits_.load(std::memory_order_relaxed);
  }

 private:
  static const void* Self() {
#if defined(__x86_64__) || defined(__aarch64__)
    return __builtin_thread_pointer();  // one register read; unique among live threads
#else
    static thread_local char tag;
    return &tag;
#endif
  }

  bool TryOwnerEnter() {
    const void* self = Self();
    if (owner_.load(std::memory_order_relaxed) != self) return false;
    busy_.store(true, std::memory_order_relaxed);
    // The light side of the asymmetric fence: the revoker's membarrier orders this store before
    // the load below on the hardware; only the compiler must not reorder them.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (owner_.load(std::memory_order_relaxed) == self) {
      held_by_owner_ = true;
      ++owner_entries_;
      return true;
    }
    busy_.store(false, std::memory_order_release);  // revoked meanwhile: take the inner lock
    return false;
  }

  /// With the inner lock held: revokes another thread's bias, waits (at most `spins` times,
  /// then false: the caller lets the inner lock go) for an owner still inside, and counts the
  /// run that may bias the lock to this thread.
  bool AfterInnerLocked(int spins);
  void EndRevocation() { revoking_.store(false, std::memory_order_relaxed); }
  /// After a failed bounded try (`slow_before`: slow_ before it spun): true once the inner lock
  /// is taken behind a Lock() caller or a revocation; false when only bounded tries were in the
  /// way. Out of line: the slow path.
  bool WaitBehindSlowHolder(int spins, std::uint64_t slow_before);
  bool SlowHolderAround() const {
    return revoking_.load(std::memory_order_relaxed) ||
           (slow_.load(std::memory_order_relaxed) & kSlowInsideMask) != 0;
  }

  SpinLock inner_;
  HeavyBarrier barrier_;
  void* barrier_context_ = nullptr;
  std::atomic<bool> revoking_{false};  // set by a revoker, cleared when it unlocks
  // Lock() callers: entries ever made (high half, so that one who came and went within a spin
  // is seen) and callers waiting or inside (low half).
  static constexpr std::uint64_t kSlowEntry = std::uint64_t{1} << 32;
  static constexpr std::uint64_t kSlowInsideMask = kSlowEntry - 1;
  std::atomic<std::uint64_t> slow_{0};
  bool held_slow_ = false;  // written by whoever holds the lock
  std::atomic<std::uint64_t> slow_holder_waits_{0};
  std::atomic<const void*> owner_{nullptr};
  std::atomic<bool> busy_{false};  // the owner is inside
  bool held_by_owner_ = false;     // written by whoever holds the lock
  bool bias_enabled_ = false;
  const void* run_thread_ = nullptr;  // under the inner lock
  std::uint32_t run_length_ = 0;
  std::uint64_t owner_entries_ = 0;
  std::uint64_t revocations_ = 0;
};

}  // namespace chameleon::shim
