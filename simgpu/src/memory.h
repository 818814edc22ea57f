// Plain device allocations (cuMemAlloc*, stream-ordered pools) and pinned host memory, all backed
// by anonymous mmap so device memory is committed lazily and freed memory really goes away.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <mutex>

#include "driver.h"

namespace chameleon::simgpu {

inline constexpr std::uint32_t kPoolMagic = 0x4c4f4f50u;

/// A cuMemFreeAsync the stream has not executed yet: its bytes stay charged to the device until
/// the worker reaches it, but a later allocation on the same stream may take them over.
struct PendingFree {
  std::uint64_t id = 0;
  Stream* stream = nullptr;  ///< streams are never freed, so the pointer is a stable identity
  std::uint64_t seq = 0;     ///< the free's position in the stream's queue (0 until published)
  std::uint64_t vtime = 0;   ///< virtual time at which the stream reaches the free
  std::uint64_t bytes = 0;   ///< charged bytes not yet taken over by a later allocation
  std::uint32_t epoch = 0;   ///< ChargeEpoch() of the freed allocation's charge
  bool published = false;    ///< false while cuMemFreeAsync is still submitting the free
};

/// A CUmemoryPool with stream-ordered reuse (docs/simgpu.md, "Stream-ordered allocation").
/// Executed frees return to the device at once (no caching above the release threshold 0);
/// pending frees are reusable by later allocations on their own stream. Thread-safe.
struct MemPool {
  std::atomic<std::uint32_t> magic{kPoolMagic};
  int device = 0;
  std::atomic<std::uint64_t> release_threshold{0};
  std::atomic<std::uint64_t> used{0};
  std::atomic<std::uint64_t> used_high{0};

  /// Records a pending free of `bytes` on `s` (not reusable until Publish). Returns its id.
  std::uint64_t AddPending(Device* dev, Stream* s, std::uint64_t bytes, std::uint32_t epoch);
  /// Makes a pending free reusable once it is in `s`'s queue at `seq` (ends at `vtime`).
  void Publish(std::uint64_t id, std::uint64_t seq, std::uint64_t vtime);
  /// The stream reached the free: uncharges whatever no allocation took over. Idempotent.
  void CompletePending(Device* dev, std::uint64_t id);
  /// Charges `bytes` for an allocation on `s`, taking over bytes of frees pending on `s` first;
  /// false (nothing changed) when the remainder does not fit the device.
  bool ChargeStreamOrdered(Device* dev, Stream* s, std::uint64_t bytes);
  /// Waits until every published free pending on a stream other than `s` has executed; raises
  /// the host clock to their end. False if there was none.
  bool WaitForOtherStreams(Stream* s);

 private:
  std::mutex mu_;
  std::list<PendingFree> pending_;  ///< guarded by mu_
  std::uint64_t next_id_ = 1;       ///< guarded by mu_
};

MemPool* DefaultPool(int device);
MemPool* AsPool(CUmemoryPool h);
/// Remembers a created pool for WaitForPendingFrees (pools are never freed).
void RegisterPool(MemPool* pool);
/// Waits for the published frees pending in every pool of `device` on streams other than
/// `except` (the OOM path of stream-ordered allocation). False if there was none.
bool WaitForPendingFrees(int device, Stream* except);

/// Allocates `bytes` on `dev` (capacity-checked); `pool` non-null for stream-ordered allocations
/// on `stream`, which may then reuse the bytes of frees pending on that stream.
CUresult AllocDevice(Device* dev, std::size_t bytes, MemPool* pool, CUdeviceptr* out,
                     Stream* stream = nullptr);
/// Frees a device allocation by base address (host-synchronising variant: caller syncs first).
CUresult FreeDevice(CUdeviceptr ptr);

}  // namespace chameleon::simgpu
