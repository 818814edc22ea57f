// Address-range registry: which host virtual ranges are simulated device memory, pinned host
// memory or VMM reservations. Used to classify copy endpoints and to validate kernel arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <optional>
#include <shared_mutex>

namespace chameleon::simgpu {

struct Reservation;

enum class RangeKind : std::uint8_t {
  kDevice,       ///< cuMemAlloc / cuMemAllocAsync / cuMemAllocPitch
  kPinnedHost,   ///< cuMemHostAlloc / cuMemAllocHost
  kReservation,  ///< cuMemAddressReserve (device of each mapped piece found via `reservation`)
};

struct Range {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  RangeKind kind = RangeKind::kDevice;
  int device = -1;                     ///< owning device for kDevice
  int numa = -1;                       ///< kPinnedHost: its NUMA node (-1: local to any device)
  std::size_t charged = 0;             ///< bytes charged against capacity
  std::uint32_t epoch = 0;             ///< ChargeEpoch() of the charge
  Reservation* reservation = nullptr;  ///< for kReservation
  bool async = false;                  ///< allocated stream-ordered (cuMemAllocAsync)
  bool external = false;               ///< cuMemHostRegister: memory the caller owns
  void* pool = nullptr;                ///< MemPool for stream-ordered allocations
};

/// Where an address lives, as far as the simulated hardware is concerned.
enum class Place : std::uint8_t { kDevice, kPinnedHost, kUnmappedDevice, kPageableHost };

/// Thread-safe (reader/writer lock).
class Registry {
 public:
  void Add(const Range& r);
  /// Removes the range starting exactly at `base`; false if there is none.
  bool Remove(std::uintptr_t base, Range* removed);
  /// The range containing `addr`, if any.
  std::optional<Range> Find(std::uintptr_t addr) const;
  /// Classifies `addr`; `device` receives the device for kDevice / kUnmappedDevice, `numa` (if
  /// given) the NUMA node of pinned host memory (-1 when it is local to whichever device copies).
  Place Classify(std::uintptr_t addr, int* device, int* numa = nullptr) const;
  /// Held across fork() so that the child never inherits it locked.
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }
  /// In the child: a pthread rwlock cannot be unlocked there (its writer's thread id changed), so
  /// it is re-created; the prepare handler guaranteed no update was in progress.
  void ResetLockInForkChild() { new (&mu_) std::shared_mutex; }

 private:
  mutable std::shared_mutex mu_;
  std::map<std::uintptr_t, Range> ranges_;
};

}  // namespace chameleon::simgpu
