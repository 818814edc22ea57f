#include "chameleon/topology/location_aware.h"

#include <algorithm>
#include <queue>
#include <tuple>

namespace chameleon::topology {
namespace {

using Rank = std::tuple<double, int, int>;  // distance, hops, helper index

double Distance(const Topology& topo, int a, int b, Nearness nearness) {
  return nearness == Nearness::kHops ? static_cast<double>(topo.Hops(a, b))
                                     : topo.SecondsPerByte(a, b);
}

std::string Bytes(std::uint64_t b) { return std::to_string(b) + " bytes"; }

// Serves one Sender from its own priority queue of reachable Helpers with room; returns the
// bytes it could not place. `spare` is shared by all Senders, which is how a Helper's
// remainder is "re-queued" for the next one.
std::uint64_t Serve(const Topology& topo, int s, const Sender& sender,
                    const std::vector<Helper>& helpers, std::vector<std::uint64_t>& spare,
                    Nearness nearness, std::vector<Grant>& out) {
  std::priority_queue<Rank, std::vector<Rank>, std::greater<>> queue;
  for (int h = 0; h < static_cast<int>(helpers.size()); ++h) {
    const int hops = topo.Hops(sender.place, helpers[h].place);
    if (spare[h] == 0 || hops == kUnreachable) continue;
    queue.emplace(Distance(topo, sender.place, helpers[h].place, nearness), hops, h);
  }
  std::uint64_t need = sender.bytes;
  while (need > 0 && !queue.empty()) {
    const int h = std::get<2>(queue.top());
    queue.pop();
    const std::uint64_t take = std::min(need, spare[h]);
    out.push_back(Grant{s, h, take});
    spare[h] -= take;
    need -= take;
  }
  return need;
}

}  // namespace

Allocation AllocateNearest(const Topology& topo, const std::vector<Sender>& senders,
                           const std::vector<Helper>& helpers, Nearness nearness) {
  Allocation result;
  std::vector<std::uint64_t> spare;
  std::uint64_t demand = 0;
  std::uint64_t supply = 0;
  for (const Helper& h : helpers) spare.push_back(h.bytes), supply += h.bytes;
  for (const Sender& s : senders) demand += s.bytes;
  for (int s = 0; s < static_cast<int>(senders.size()); ++s) {
    const std::uint64_t left = Serve(topo, s, senders[s], helpers, spare, nearness, result.grants);
    if (left > 0 && result.error.empty()) {
      result.error = "sender " + std::to_string(s) + " (" + topo.place(senders[s].place).name +
                     ") is short by " + Bytes(left) + "; total demand " + Bytes(demand) +
                     ", total spare " + Bytes(supply);
    }
    result.uncovered += left;
  }
  NormaliseGrants(result.grants);
  return result;
}

double GlobalCost(const Topology& topo, const std::vector<Sender>& senders,
                  const std::vector<Helper>& helpers, const std::vector<Grant>& grants) {
  double cost = 0;
  for (const Grant& g : grants) {
    cost += static_cast<double>(g.bytes) *
            topo.SecondsPerByte(senders[g.sender].place, helpers[g.helper].place);
  }
  return cost;
}

std::string CheckAllocation(const std::vector<Sender>& senders, const std::vector<Helper>& helpers,
                            const std::vector<Grant>& grants, bool require_cover) {
  std::vector<std::uint64_t> got(senders.size(), 0);
  std::vector<std::uint64_t> lent(helpers.size(), 0);
  for (const Grant& g : grants) {
    if (g.sender < 0 || g.helper < 0 || g.sender >= static_cast<int>(senders.size()) ||
        g.helper >= static_cast<int>(helpers.size())) {
      return "grant names an unknown sender or helper";
    }
    got[g.sender] += g.bytes;
    lent[g.helper] += g.bytes;
  }
  for (std::size_t h = 0; h < helpers.size(); ++h) {
    if (lent[h] > helpers[h].bytes) return "helper " + std::to_string(h) + " lends too much";
  }
  for (std::size_t s = 0; s < senders.size(); ++s) {
    if (got[s] > senders[s].bytes) return "sender " + std::to_string(s) + " receives too much";
    if (require_cover && got[s] < senders[s].bytes) {
      return "sender " + std::to_string(s) + " is not covered";
    }
  }
  return {};
}

void NormaliseGrants(std::vector<Grant>& grants) {
  std::sort(grants.begin(), grants.end(), [](const Grant& a, const Grant& b) {
    return std::tie(a.sender, a.helper) < std::tie(b.sender, b.helper);
  });
  std::vector<Grant> merged;
  for (const Grant& g : grants) {
    if (g.bytes == 0) continue;
    if (!merged.empty() && merged.back().sender == g.sender && merged.back().helper == g.helper) {
      merged.back().bytes += g.bytes;
    } else {
      merged.push_back(g);
    }
  }
  grants = std::move(merged);
}

bool MutatePairing(std::vector<Grant>& grants, const std::vector<Helper>& helpers, Rng& rng,
                   std::uint64_t quantum) {
  if (grants.empty()) return false;
  std::vector<std::uint64_t> free(helpers.size());
  for (std::size_t h = 0; h < helpers.size(); ++h) free[h] = helpers[h].bytes;
  for (const Grant& g : grants) free[g.helper] -= g.bytes;
  const Grant picked = grants[rng.Index(grants.size())];
  std::vector<int> targets;
  for (int h = 0; h < static_cast<int>(helpers.size()); ++h) {
    if (h != picked.helper && free[h] > 0) targets.push_back(h);
  }
  if (targets.empty()) return false;
  const int to = targets[rng.Index(targets.size())];
  const std::uint64_t fits = std::min(picked.bytes, free[to]);
  // No draw when quantum is 0, so the planner's sequences are the same as before quanta.
  const std::uint64_t units = quantum > 0 ? fits / quantum : 0;
  const std::uint64_t moved = units > 0 ? quantum * (1 + rng.Below(units)) : fits;
  for (Grant& g : grants) {
    if (g.sender == picked.sender && g.helper == picked.helper && g.bytes > 0) {
      g.bytes -= moved;
      break;
    }
  }
  grants.push_back(Grant{picked.sender, to, moved});
  NormaliseGrants(grants);
  return true;
}

bool ExchangePairings(std::vector<Grant>& grants, Rng& rng) {
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < static_cast<int>(grants.size()); ++i) {
    for (int j = i + 1; j < static_cast<int>(grants.size()); ++j) {
      if (grants[i].sender != grants[j].sender && grants[i].helper != grants[j].helper) {
        pairs.emplace_back(i, j);
      }
    }
  }
  if (pairs.empty()) return false;
  const auto [i, j] = pairs[rng.Index(pairs.size())];
  const Grant a = grants[i];
  const Grant b = grants[j];
  const std::uint64_t amount = std::min(a.bytes, b.bytes);
  grants[i].bytes -= amount;
  grants[j].bytes -= amount;
  grants.push_back(Grant{a.sender, b.helper, amount});
  grants.push_back(Grant{b.sender, a.helper, amount});
  NormaliseGrants(grants);
  return true;
}

}  // namespace chameleon::topology
