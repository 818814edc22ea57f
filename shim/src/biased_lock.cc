#include "biased_lock.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace chameleon::shim {
namespace {

bool RegisterMembarrier() {
  // PRIVATE_EXPEDITED interrupts only the CPUs running this process's threads (microseconds);
  // the global command would wait for a grace period (milliseconds).
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

bool Membarrier(void* /*context*/) {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

}  // namespace

BiasedLock::BiasedLock() : BiasedLock(Membarrier, nullptr) {}

BiasedLock::BiasedLock(HeavyBarrier barrier, void* context)
    : barrier_(barrier), barrier_context_(context), bias_enabled_(RegisterMembarrier()) {}

bool BiasedLock::WaitBehindSlowHolder(int spins, std::uint64_t slow_before) {
  if ((slow_before & kSlowInsideMask) == 0 &&
      slow_.load(std::memory_order_relaxed) == slow_before &&
      !revoking_.load(std::memory_order_relaxed)) {
    return false;  // no Lock() caller here during the spin: only bounded tries in the way
  }
  slow_holder_waits_.fetch_add(1, std::memory_order_relaxed);
  do {
    // The holder may be off the CPU (a revoker's system call rescheduled it): give it the core.
    sched_yield();
    if (inner_.TryLockBounded(spins)) return true;
  } while (SlowHolderAround());
  return inner_.TryLockBounded(spins);
}

bool BiasedLock::AfterInnerLocked(int spins) {
  const void* self = Self();
  const void* owner = owner_.load(std::memory_order_relaxed);
  if (owner != nullptr && owner != self) {
    revoking_.store(true, std::memory_order_relaxed);
    owner_.store(nullptr, std::memory_order_relaxed);
    // Registered, so a failure is only a seccomp filter: stay unbiased.
    if (!barrier_(barrier_context_)) bias_enabled_ = false;
    ++revocations_;
  }
  // An owner that entered before the barrier is still inside: wait for it. Once the owner is
  // cleared no one enters that way, so the flag only falls; a later holder checks it again.
  // The revocation stays in progress (others wait for it) until the revoker unlocks.
  for (int i = 0; busy_.load(std::memory_order_acquire); ++i) {
    if (i >= spins) return false;
#if defined(__x86_64__)
    _mm_pause();
#endif
  }
  held_by_owner_ = false;
  if (run_thread_ == self) {
    ++run_length_;
  } else {
    run_thread_ = self;
    run_length_ = 1;
  }
  if (bias_enabled_ && run_length_ >= kBiasAfter) {
    // Read by this thread on its next entry; by others only under the inner lock.
    owner_.store(self, std::memory_order_relaxed);
  }
  return true;
}

void BiasedLock::ResetForChild() {
  new (&inner_) SpinLock();
  owner_.store(nullptr, std::memory_order_relaxed);
  busy_.store(false, std::memory_order_relaxed);
  held_by_owner_ = false;
  revoking_.store(false, std::memory_order_relaxed);
  slow_.store(0, std::memory_order_relaxed);
  held_slow_ = false;
  run_thread_ = nullptr;
  run_length_ = 0;
  // Registration belongs to the address space; the child's is new.
  bias_enabled_ = RegisterMembarrier();
}

}  // namespace chameleon::shim
