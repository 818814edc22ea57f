// The lock that serialises the event ring's producers.
//
// Why a bounded spin lock: the ring is single-producer, and the critical section is a copy of a
// few dozen bytes, so an uncontended acquire (one exchange) is the cheapest correct choice.
// Per-thread staging rings would avoid even that but reorder ops across threads and need a
// merge thread. Ops (launch/copy/memset) only *try* for a bounded number of spins and drop the
// record (counted, as the protocol allows) rather than wait behind a preempted holder; the rarer
// allocation/free/sync records, whose loss would desynchronise the daemon's tensor table, spin and
// then yield. Thread-safe.
#pragma once

#include <sched.h>

#include <atomic>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace chameleon::shim {

class SpinLock {
 public:
  /// Hot path: true when acquired within `spins` attempts.
  bool TryLockBounded(int spins = 512) {
    for (int i = 0; i < spins; ++i) {
      if (!locked_.load(std::memory_order_relaxed) &&
          !locked_.exchange(true, std::memory_order_acquire)) {
        return true;
      }
#if defined(__x86_64__)
      _mm_pause();
#endif
    }
    return false;
  }
  /// Slow paths only (may yield the CPU).
  void Lock() {
    while (!TryLockBounded()) sched_yield();
  }
  void Unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace chameleon::shim
