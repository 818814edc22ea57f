// Location-aware allocation (WATOS Algorithm 3): each Sender (a place whose memory overflows)
// takes the nearest Helpers (places with spare memory) until its overflow is covered; a Helper
// that has room left after a grant stays available to the next Sender.
//
// Used by the wafer planner (dies, Manhattan hops) and node placement (GPUs and NUMA nodes,
// where seconds per byte separates a peer over NVLink from host memory over PCIe). The two
// GA operators that act on pairings (WATOS Op4, Op5) live here too, since both users share them.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/topology/rng.h"
#include "chameleon/topology/topology.h"

namespace chameleon::topology {

struct Sender {
  int place = 0;
  std::uint64_t bytes = 0;  ///< overflow to place elsewhere
};

struct Helper {
  int place = 0;
  std::uint64_t bytes = 0;  ///< spare capacity it can lend
};

/// `bytes` of Sender `sender` live on Helper `helper` (indices into the two vectors).
struct Grant {
  int sender = 0;
  int helper = 0;
  std::uint64_t bytes = 0;
  friend bool operator==(const Grant&, const Grant&) = default;
};

/// What "nearest" means: WATOS ranks by hops; a node ranks by time per byte.
enum class Nearness : std::uint8_t { kHops, kSecondsPerByte };

struct Allocation {
  std::vector<Grant> grants;    ///< sorted by (sender, helper), one per pair
  std::uint64_t uncovered = 0;  ///< overflow no reachable Helper could take (0 when ok())
  std::string error;            ///< empty when every Sender is covered
  bool ok() const { return error.empty(); }
};

/// Algorithm 3. Senders are served in the order given; ties in distance go to the Helper with
/// fewer hops, then the lower index. When demand exceeds what is reachable, the grants cover
/// as much as possible and `error` names the first Sender left short and the byte counts.
Allocation AllocateNearest(const Topology& topo, const std::vector<Sender>& senders,
                           const std::vector<Helper>& helpers, Nearness nearness = Nearness::kHops);

/// Σ bytes × seconds-per-byte of the route: hops × bytes / link bandwidth on a uniform mesh.
double GlobalCost(const Topology& topo, const std::vector<Sender>& senders,
                  const std::vector<Helper>& helpers, const std::vector<Grant>& grants);

/// Empty when every grant names valid indices, no Helper lends more than its spare and no
/// Sender receives more than its overflow (and exactly its overflow when `require_cover`).
std::string CheckAllocation(const std::vector<Sender>& senders, const std::vector<Helper>& helpers,
                            const std::vector<Grant>& grants, bool require_cover);

/// Merges grants of the same pair, drops empty ones, sorts by (sender, helper).
void NormaliseGrants(std::vector<Grant>& grants);

/// Op4: moves (part of) one random grant to another Helper with free room. False if none can.
/// With `quantum` 0 it moves the whole grant, or what fits; otherwise a uniformly drawn number
/// of quanta that fits (what is left when less than one quantum fits), so that node placement
/// can split a grant and the search space is countable.
bool MutatePairing(std::vector<Grant>& grants, const std::vector<Helper>& helpers, Rng& rng,
                   std::uint64_t quantum = 0);
/// Op5: two grants of different Senders on different Helpers swap Helpers for the smaller of
/// their byte counts, so every Helper's load is unchanged. False if no such pair exists.
bool ExchangePairings(std::vector<Grant>& grants, Rng& rng);

}  // namespace chameleon::topology
