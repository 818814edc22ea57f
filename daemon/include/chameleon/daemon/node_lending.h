// NodeLending: node placement for all clients of the daemon at once (issue 16 item 6). Each round
// it takes every client's swap demand, builds the node (topology::BuildNode from the clients'
// HELLO device facts and sysfs), offers as helpers the host NUMA nodes and the spare of every
// opted-in GPU (LeaseBook), runs topology::PlaceNode and turns the grants on peer GPUs into
// leases; it drives revocations (the owner's reclaim_request_bytes, the lessee's
// leases_applied_generation, the deadline) and says which clients need a new policy. Decorate()
// then writes a client's part into its policy: its leases (by its own ordinals), each entry's
// tier and helper, and, for an owner, `lent_bytes`.
//
// A client's other devices (a pipeline process drives one per stage) lend their room beyond its
// peak there to that client's own swaps only (LeaseBook self-only GPUs): memory it could allocate
// itself anyway, so neither the operator's GPU opt-in nor the uid rules apply, and its limit is not
// lowered by them. No shim limits a process on its other devices, so nothing there asks memory
// back: a peak that grows into the lease revokes it at the next round (the reserve is the margin
// meanwhile). A GPU another client also uses is nobody's to lend this way.
//
// Each placement covers the whole node (every client's demand, every GPU's lendable bytes, its
// leases included); leases only grow towards its answer, and a lease lasts until its owner asks
// for it back or either client leaves, so a steady node sees no churn.
// Not thread-safe: the daemon's loop thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chameleon/daemon/lease_book.h"
#include "chameleon/daemon/lending_metrics.h"
#include "chameleon/daemon/options.h"
#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/topology/location_aware.h"
#include "chameleon/topology/node.h"

namespace chameleon::daemon {

/// What a round needs to know of one client (ClientSession::NodeView()).
struct NodeClient {
  std::uint32_t id = 0;
  std::uint32_t uid = 0;
  std::vector<ipc::DeviceFacts> devices;  ///< HELLO
  /// The device its swap executor serves, by its own ordinal (segment executor_device − 1): the
  /// client's own GPU. -1 until decided (or from an older shim): the first of `devices` then.
  int executor_ordinal = -1;
  /// The program's peak bytes on each device, by ordinal (segment device_peak_bytes; empty from
  /// an older shim). Its other devices with a peak are its own too: their room beyond that peak
  /// is lent to its own swaps (a pipeline's later stages hold less than the first).
  std::vector<std::uint64_t> device_peaks;
  /// What the client may use of its GPU before lending (operator, job and device limits): a GPU
  /// lends out of this, never out of headroom the operator kept for other tenants.
  std::uint64_t limit_bytes = 0;
  std::uint64_t peak_bytes = 0;  ///< segment device_bytes_peak
  std::uint64_t reclaim_request_bytes = 0;
  std::uint64_t leases_applied_generation = 0;
  std::uint64_t demand_bytes = 0;  ///< swap bytes per iteration of its policy in force
  double iteration_s = 0;          ///< that policy's predicted iteration time
  double window_s = 0;             ///< compute its transfers may hide behind
};

class NodeLending {
 public:
  /// `topology_yaml`: CHAMELEON_TOPOLOGY's text ("" none), the link figures and host memory that
  /// override what the node reports (topology::NodeSources::override_yaml).
  NodeLending(LendingMetrics* metrics, std::string topology_yaml)
      : book_(0, 0), metrics_(metrics), topology_yaml_(std::move(topology_yaml)) {}

  /// One round at `now_ns`. Returns the clients whose policy must be republished, in the order to
  /// publish them (owners whose limit drops before the lessees that may use the memory).
  std::vector<std::uint32_t> Round(std::uint64_t now_ns, const std::vector<NodeClient>& clients,
                                   const LendingOptions& options);
  /// Client `id` left: its leases are freed and those on its GPU revoked. Returns the clients to
  /// republish: the owners it borrowed from (their limit comes back) and its lessees.
  std::vector<std::uint32_t> ClientGone(std::uint32_t id, std::uint64_t now_ns);

  /// Writes client `id`'s leases, entry destinations and lent bytes into `policy`; `devices` are
  /// its HELLO facts, `device_limit` the limit it plans for, already lowered by LentBy(id).
  void Decorate(std::uint32_t id, const std::vector<ipc::DeviceFacts>& devices,
                std::uint64_t device_limit, ipc::Policy* policy) const;
  /// Client `id` was sent policy `generation` (a revoked lease it omits completes on it).
  void Published(std::uint32_t id, std::uint64_t generation) { book_.Published(id, generation); }
  /// Bytes of client `id`'s GPU lent to others (its limit is lowered by them).
  std::uint64_t LentBy(std::uint32_t id) const { return book_.LentBy(id); }

  const LeaseBook& book() const { return book_; }
  /// chameleonctl leases: leases, revocation counts, the last placement.
  void Describe(nlohmann::json* out) const;

 private:
  /// Registers, pauses and revokes lenders from the owners' state; returns lessees to republish.
  void UpdateLenders(std::uint64_t now_ns, const std::vector<NodeClient>& clients,
                     const LendingOptions& options, std::vector<std::uint32_t>* republish);
  /// Registers each client's other devices it alone uses as self-only lenders (revoking a lease
  /// its peak grew into), and pauses those no longer so; lessees to republish.
  void UpdateSelfLenders(std::uint64_t now_ns, const std::vector<NodeClient>& clients,
                         const LendingOptions& options,
                         const std::map<std::string, std::vector<const NodeClient*>>& owners,
                         const std::map<std::string, int>& users,
                         std::vector<std::uint32_t>* republish);
  /// Completed and hung revocations; owners whose limit comes back go to `republish`.
  void SettleRevocations(std::uint64_t now_ns, const std::vector<NodeClient>& clients,
                         std::vector<std::uint32_t>* republish);
  /// PlaceNode over the whole node when its inputs changed; new leases; owners then lessees to
  /// `republish`.
  void Place(const std::vector<NodeClient>& clients, const LendingOptions& options,
             std::vector<std::uint32_t>* republish);
  /// False when the placement's inputs are those of the last one (no rerun needed).
  bool InputsChanged(const std::vector<NodeClient>& clients, const LendingOptions& options);
  /// The helpers a placement may use, with the GPU bus id ("" for a NUMA node) or NUMA id (-1
  /// for a GPU) of each.
  struct Helpers {
    std::vector<topology::Helper> helpers;
    std::vector<std::string> gpu;
    std::vector<int> numa;
  };
  Helpers OfferedHelpers(const topology::Node& node) const;
  /// A grant of `bytes` on NUMA node `numa` to `client`: that node becomes its host share's when
  /// it is the largest so far; true when its policy must name the new node.
  bool ChooseNuma(std::uint32_t client, std::uint64_t bytes, int numa,
                  std::map<std::uint32_t, std::uint64_t>* numa_bytes);
  /// A grant of `bytes` on `gpu` to client `c`: grows its lease there towards them (whole chunks,
  /// within the spare); returns the bytes the placement puts there.
  std::uint64_t Lend(const NodeClient& c, const std::string& gpu, std::uint64_t bytes,
                     const LendingOptions& options, std::vector<std::uint32_t>* owners,
                     std::vector<std::uint32_t>* lessees);

  LeaseBook book_;
  LendingMetrics* metrics_;
  std::string topology_yaml_;
  std::map<std::uint32_t, int> numa_of_;  // client -> host NUMA node its host share goes to
  std::string last_inputs_;               // the last placement's inputs: unchanged, no rerun
  std::string last_error_;
  double last_cost_ = 0;
  std::size_t numa_nodes_ = 0;  // of the last node built
  std::uint64_t completed_ = 0, hung_ = 0;
};

}  // namespace chameleon::daemon
