// Destinations: where swapped-out bytes go. The policy's entry names a preference (a peer GPU,
// a host NUMA node, or host memory: Placement); the leases of the policy in force are the
// authority over peers: an entry may use a peer GPU only while a lease on it has room. Every
// refusal — CHAMELEON_PLACEMENT=host, no lease, the lease's bytes reached, the peer out of
// memory, a driver without device-to-device copies — falls back to the local HostPool, and the
// caller sees where the bytes really went.
//
// Leases change only with a policy (SetLeases); what the executor then holds on a GPU beyond its
// new cap is moved back to host memory by the caller (TransferScheduler::MoveToHost, driven by
// SwapEngine::SettleLeases), and the idle buffers beyond it are freed here (Trim).
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>

#include "chameleon/ipc/policy_blob.h"
#include "swap/host_pool.h"
#include "swap/placement.h"
#include "swap/swap_base.h"
#include "swap/vmm_buffer_pool.h"

namespace chameleon::shim::swap {

class Destinations {
 public:
  /// `device`: the executor's own device (never its own helper). `peer_copies`: the driver table
  /// has device-to-device copies (without them every placement is host memory).
  Destinations(const SwapBase& base, HostPool* host, int device, PlacementMode mode,
               bool peer_copies)
      : base_(base), host_(host), device_(device), mode_(mode), peer_copies_(peer_copies) {
    host_->CountAlso(&numa_held_);
  }

  /// A buffer of `span` bytes at `want` if allowed there, else in host memory; `*got` says where.
  /// Null when not even host memory has room (the host pool's cap). `*fence`: as HostPool's.
  void* Acquire(Placement want, std::size_t span, Fence** fence, Placement* got);
  /// A host-memory buffer only (a move back from a peer).
  void* AcquireHost(std::size_t span, Fence** fence) { return host_->Acquire(span, fence); }
  /// Gives back a buffer obtained at `where`; `busy` (may be null): work still using it.
  void Release(void* buffer, std::size_t span, Placement where, Fence* busy);

  /// The leases of the policy now in force: each helper's cap becomes its lease's bytes (summed
  /// if a helper is named twice); a helper not named gets 0. Peers refused before may be asked
  /// again.
  void SetLeases(std::span<const ipc::LeaseGrant> leases);
  /// Bytes held on peer GPU `helper` beyond its cap (0 when within it).
  std::uint64_t OverCap(std::uint16_t helper) const;
  /// True when every peer pool holds at most its cap.
  bool WithinCaps() const;
  /// Frees idle peer buffers beyond each cap, only those whose last copy completed (no host
  /// wait); with `all`, every idle buffer of every pool, waiting for them (teardown).
  void Trim(bool all = false);
  /// Bytes held on peer GPUs (idle and in use), all helpers.
  std::uint64_t peer_held_bytes() const;

 private:
  using Key = std::pair<ipc::Tier, std::uint16_t>;
  VmmBufferPool* PoolFor(Placement p);
  std::uint64_t LimitFor(Placement p, const VmmBufferPool& pool) const;
  void PublishHeld();

  SwapBase base_;
  HostPool* host_;
  int device_;
  PlacementMode mode_;
  bool peer_copies_;
  std::map<std::uint16_t, std::uint64_t> caps_;  // peer helper -> lease bytes
  std::uint64_t numa_held_ = 0;                  // all NUMA pools' bytes (the host cap's share)
  std::map<Key, std::unique_ptr<VmmBufferPool>> pools_;
};

}  // namespace chameleon::shim::swap
