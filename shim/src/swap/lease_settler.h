// LeaseSettler: keeps what the executor holds on peer GPUs within the leases of the policy in
// force. A new policy's leases become the caps at once (no new bytes beyond them); the copies
// held beyond a dropped or shrunk lease are moved back to host memory on the out stream (no
// host wait), and the buffers they leave are freed once those moves have read them — checked
// again at each iteration boundary. When every peer is within its cap, the policy's generation
// is published as leases_applied_generation: the daemon's proof that the revocation completed.
//
// Not thread-safe: owned by SwapEngine, used under its mutex.
#pragma once

#include <cstdint>
#include <span>

#include "chameleon/ipc/policy_blob.h"
#include "swap/allocation_table.h"
#include "swap/destinations.h"
#include "swap/swap_base.h"
#include "swap/transfer_scheduler.h"

namespace chameleon::shim::swap {

class LeaseSettler {
 public:
  LeaseSettler(const SwapBase& base, AllocationTable* table, TransferScheduler* transfers,
               Destinations* destinations)
      : base_(base), table_(table), transfers_(transfers), destinations_(destinations) {}

  /// The leases of policy `generation`, now in force; settles what it can at once.
  void Apply(std::span<const ipc::LeaseGrant> leases, std::uint64_t generation);
  /// Moves copies beyond the caps to host memory and frees idle buffers whose moves completed;
  /// publishes the generation once within every cap. Cheap when nothing is pending.
  void Settle();
  bool pending() const { return pending_; }

 private:
  SwapBase base_;
  AllocationTable* table_;
  TransferScheduler* transfers_;
  Destinations* destinations_;
  bool pending_ = false;
  std::uint64_t generation_ = 0;
};

}  // namespace chameleon::shim::swap
