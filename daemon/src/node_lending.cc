#include "chameleon/daemon/node_lending.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "chameleon/daemon/swap_chunk.h"
#include "chameleon/topology/node.h"
#include "chameleon/topology/node_placement.h"

namespace chameleon::daemon {
namespace {

/// A GPU smaller than this spare is not offered: a lease of a few MiB costs the lessee a policy
/// republish and the owner a limit change for no measurable gain.
constexpr std::uint64_t kMinLendBytes = 64ull << 20;
/// Op4 of the optimiser moves bytes in these steps: fine enough for GPU-sized spares, coarse
/// enough that a round over a node's handful of GPUs takes milliseconds.
constexpr std::uint64_t kPlacementQuantum = 256ull << 20;

/// The bus id a DeviceFacts row carries, lower-case (HELLO's field is NUL-terminated by
/// validation, but a bounded read costs nothing).
std::string BusOf(const ipc::DeviceFacts& d) {
  std::string bus(d.pci_bus_id, strnlen(d.pci_bus_id, sizeof(d.pci_bus_id)));
  for (char& c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return bus;
}

/// This process's ordinal of GPU `bus`, or -1 when it cannot see it.
int OrdinalOf(const std::vector<ipc::DeviceFacts>& devices, const std::string& bus) {
  for (const ipc::DeviceFacts& d : devices) {
    if (BusOf(d) == bus) return d.ordinal;
  }
  return -1;
}

std::string OwnGpu(const NodeClient& c) {
  for (const ipc::DeviceFacts& d : c.devices) {
    if (c.executor_ordinal >= 0 && d.ordinal == c.executor_ordinal) return BusOf(d);
  }
  return c.devices.empty() ? std::string() : BusOf(c.devices.front());
}

/// The program's peak on `d` (0 when the shim reports none for it).
std::uint64_t PeakOn(const NodeClient& c, const ipc::DeviceFacts& d) {
  return d.ordinal >= 0 && static_cast<std::size_t>(d.ordinal) < c.device_peaks.size()
             ? c.device_peaks[static_cast<std::size_t>(d.ordinal)]
             : 0;
}

/// The clients' device facts as topology::BuildNode takes them.
std::vector<topology::GpuReport> Reports(const std::vector<NodeClient>& clients) {
  std::vector<topology::GpuReport> reports;
  for (const NodeClient& c : clients) {
    for (const ipc::DeviceFacts& d : c.devices) {
      topology::GpuReport r;
      r.pci_bus_id = BusOf(d);
      r.ordinal = d.ordinal;
      r.host_numa_node = d.host_numa_node;
      r.total_memory = d.total_memory;
      for (const ipc::DeviceFacts& peer : c.devices) {
        if (peer.ordinal >= 0 && peer.ordinal < 64 && (d.peer_mask >> peer.ordinal & 1u) != 0) {
          r.peers.push_back(BusOf(peer));
        }
      }
      reports.push_back(std::move(r));
    }
  }
  return reports;
}

/// Bytes to lend towards `want` out of `spare`, in whole chunks: the lessee's shim holds each
/// swapped copy in a buffer of whole chunks, so the tail of a lease short of a chunk could hold
/// nothing, and a lease rounded up past the spare would lend memory the owner may need.
std::uint64_t WholeChunks(std::uint64_t want, std::uint64_t spare) {
  const std::uint64_t room = spare / kShimChunkBytes * kShimChunkBytes;
  return std::min(SwapSpan(want), room);
}

void AddOnce(std::vector<std::uint32_t>* ids, std::uint32_t id) {
  if (std::find(ids->begin(), ids->end(), id) == ids->end()) ids->push_back(id);
}

}  // namespace

std::vector<std::uint32_t> NodeLending::Round(std::uint64_t now_ns,
                                              const std::vector<NodeClient>& clients,
                                              const LendingOptions& options) {
  book_.SetRules(options.reserve_bytes, options.revoke_deadline_ns);
  std::vector<std::uint32_t> republish;
  UpdateLenders(now_ns, clients, options, &republish);
  SettleRevocations(now_ns, clients, &republish);
  if (options.node_placement) {
    Place(clients, options, &republish);
  } else {
    for (const auto& [id, numa] : numa_of_) AddOnce(&republish, id);  // back to plain host
    numa_of_.clear();
    last_inputs_.clear();  // placement back on: place afresh
  }
  std::uint64_t leased = 0;
  for (const auto& [id, lease] : book_.leases()) leased += lease.bytes;
  metrics_->active_leases().Set(double(book_.leases().size()));
  std::size_t stopped = 0;
  for (const auto& [bus, gpu] : book_.gpus()) stopped += gpu.stopped ? 1 : 0;
  metrics_->stopped_gpus().Set(double(stopped));
  metrics_->leased_bytes().Set(double(leased));
  return republish;
}

void NodeLending::UpdateLenders(std::uint64_t now_ns, const std::vector<NodeClient>& clients,
                                const LendingOptions& options,
                                std::vector<std::uint32_t>* republish) {
  std::map<std::string, std::vector<const NodeClient*>> owners;  // GPU -> clients it is own of
  std::map<std::string, int> users;  // GPU -> clients it is own of or that have a peak there
  for (const NodeClient& c : clients) {
    if (c.devices.empty()) continue;
    const std::string own = OwnGpu(c);
    owners[own].push_back(&c);
    for (const ipc::DeviceFacts& d : c.devices) {
      if (BusOf(d) == own || PeakOn(c, d) > 0) ++users[BusOf(d)];
    }
  }
  UpdateSelfLenders(now_ns, clients, options, owners, users, republish);
  for (const auto& [gpu, on] : owners) {
    const NodeClient& owner = *on.front();
    // A GPU two clients run on has no single owner whose peak bounds its use; one whose owner
    // swaps itself or asks memory back has nothing to spare.
    const bool lendable = options.node_placement && on.size() == 1 && options.LendsGpu(gpu) &&
                          options.lenders.Allows(owner.uid) && owner.demand_bytes == 0 &&
                          owner.reclaim_request_bytes == 0;
    if (lendable) {
      book_.SetLender(gpu, owner.id, owner.limit_bytes, owner.peak_bytes);
      continue;
    }
    book_.Pause(gpu);
    const std::vector<std::uint32_t> lessees = book_.Revoke(gpu, now_ns);
    if (lessees.empty()) continue;
    spdlog::info(
        "gpu {}: revoking its leases to {} client(s) (owner client {} asks {} bytes back, swaps "
        "{} bytes itself, {} client(s) on it)",
        gpu, lessees.size(), owner.id, owner.reclaim_request_bytes, owner.demand_bytes, on.size());
    for (std::uint32_t lessee : lessees) AddOnce(republish, lessee);
  }
}

void NodeLending::UpdateSelfLenders(
    std::uint64_t now_ns, const std::vector<NodeClient>& clients, const LendingOptions& options,
    const std::map<std::string, std::vector<const NodeClient*>>& owners,
    const std::map<std::string, int>& users, std::vector<std::uint32_t>* republish) {
  std::set<std::string> lending;  // self-only GPUs this round (none with placement off)
  for (const NodeClient& c : clients) {
    for (const ipc::DeviceFacts& d : c.devices) {
      const std::string gpu = BusOf(d);
      const std::uint64_t peak = PeakOn(c, d);
      if (!options.node_placement || peak == 0 || owners.contains(gpu) || users.at(gpu) != 1)
        continue;
      book_.SetLender(gpu, c.id, d.total_memory, peak, /*self_only=*/true);
      lending.insert(gpu);
      if (book_.LentOn(gpu) > book_.Lendable(gpu)) {  // its peak grew into the lease
        spdlog::info("gpu {}: client {}'s peak there grew to {} bytes; revoking its own lease", gpu,
                     c.id, peak);
        for (std::uint32_t lessee : book_.Revoke(gpu, now_ns)) AddOnce(republish, lessee);
      }
    }
  }
  // A self-only GPU no longer its client's alone (another client came, its peak is gone, or
  // placement is off).
  for (const auto& [gpu, g] : book_.gpus()) {
    if (!g.self_only || g.paused || lending.contains(gpu)) continue;
    book_.Pause(gpu);
    for (std::uint32_t lessee : book_.Revoke(gpu, now_ns)) AddOnce(republish, lessee);
  }
}

void NodeLending::SettleRevocations(std::uint64_t now_ns, const std::vector<NodeClient>& clients,
                                    std::vector<std::uint32_t>* republish) {
  for (const NodeClient& c : clients) {
    for (const RevocationOutcome& done : book_.Applied(c.id, c.leases_applied_generation)) {
      ++completed_;
      metrics_->completed().Increment();
      spdlog::info("lease {}: revoked; client {} moved its {} bytes of gpu {} home (generation {})",
                   done.lease.id, done.lease.lessee, done.lease.bytes, done.lease.gpu,
                   done.lease.omitted_generation);
      AddOnce(republish, done.lease.owner);  // its limit comes back
    }
  }
  for (const RevocationOutcome& hung : book_.Expire(now_ns)) {
    ++hung_;
    metrics_->hung().Increment();
    spdlog::error(
        "lease {}: client {} did not give back {} bytes of gpu {} by the deadline (policy {} "
        "omits the lease); the lessee is hung: gpu {} lends no more while client {} owns it, and "
        "the owner's limit is restored",
        hung.lease.id, hung.lease.lessee, hung.lease.bytes, hung.lease.gpu,
        hung.lease.omitted_generation, hung.lease.gpu, hung.lease.owner);
    AddOnce(republish, hung.lease.owner);
  }
}

bool NodeLending::InputsChanged(const std::vector<NodeClient>& clients,
                                const LendingOptions& options) {
  // Inputs: what each client swaps and what each GPU may lend in all. Each round places the
  // whole node afresh and only grows leases towards its answer (a lease never shrinks short of a
  // revocation), so unchanged inputs — PlaceNode is deterministic — need no rerun.
  std::string inputs;
  for (const NodeClient& c : clients) {
    inputs += std::to_string(c.id) + ":" + std::to_string(c.demand_bytes) + ":" +
              std::to_string(book_.Lendable(OwnGpu(c))) + ":" +
              (options.borrowers.Allows(c.uid) ? "b;" : "-;");
  }
  for (const auto& [gpu, g] : book_.gpus()) {
    if (g.self_only) inputs += gpu + "=" + std::to_string(book_.Lendable(gpu)) + ";";
  }
  if (inputs == last_inputs_) return false;
  last_inputs_ = inputs;
  return true;
}

NodeLending::Helpers NodeLending::OfferedHelpers(const topology::Node& node) const {
  // Every host NUMA node (the daemon does not see other host tenants: its capacity is all it
  // knows), then each GPU with enough to lend.
  Helpers h;
  for (const topology::NodeNuma& numa : node.numa) {
    h.helpers.push_back({numa.place, numa.capacity});
    h.gpu.emplace_back();
    h.numa.push_back(numa.id);
  }
  for (const topology::NodeGpu& gpu : node.gpus) {
    const std::uint64_t lendable = book_.Lendable(gpu.pci_bus_id);
    if (lendable < kMinLendBytes) continue;
    h.helpers.push_back({gpu.place, lendable});
    h.gpu.push_back(gpu.pci_bus_id);
    h.numa.push_back(-1);
  }
  return h;
}

void NodeLending::Place(const std::vector<NodeClient>& clients, const LendingOptions& options,
                        std::vector<std::uint32_t>* republish) {
  if (!InputsChanged(clients, options)) return;
  topology::NodeSources sources;
  sources.gpus = Reports(clients);
  sources.override_yaml = topology_yaml_;
  topology::Node node;
  if (std::string error = topology::BuildNode(sources, &node); !error.empty()) {
    if (error != last_error_) spdlog::warn("node placement: the node cannot be built: {}", error);
    last_error_ = error;
    return;
  }
  const Helpers helpers = OfferedHelpers(node);
  std::vector<topology::SwapDemand> demands;
  std::vector<std::size_t> demand_client;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    const int gpu = node.GpuIndex(OwnGpu(clients[i]));
    if (clients[i].demand_bytes == 0 || gpu < 0) continue;
    demands.push_back({node.gpus[gpu].place, clients[i].demand_bytes, clients[i].window_s,
                       clients[i].iteration_s});
    demand_client.push_back(i);
  }
  if (demands.empty() || helpers.helpers.empty()) return;

  topology::NodePlacementOptions popts;
  popts.quantum = kPlacementQuantum;
  const topology::NodePlacement placed =
      topology::PlaceNode(node.topology, demands, helpers.helpers, popts);
  metrics_->rounds().Increment();
  metrics_->cost().Set(placed.global_cost);
  last_cost_ = placed.global_cost;
  if (placed.allocation.error != last_error_ && !placed.allocation.ok()) {
    spdlog::warn("node placement: {}", placed.allocation.error);
  }
  last_error_ = placed.allocation.error;
  numa_nodes_ = node.numa.size();

  std::vector<std::uint64_t> on_helper(helpers.helpers.size(), 0);
  std::vector<std::uint32_t> owners, lessees;
  std::map<std::uint32_t, std::uint64_t> numa_bytes;  // client -> bytes on its chosen NUMA node
  for (const topology::Grant& g : placed.allocation.grants) {
    const NodeClient& c = clients[demand_client[g.sender]];
    if (helpers.gpu[g.helper].empty()) {
      on_helper[g.helper] += g.bytes;
      if (ChooseNuma(c.id, g.bytes, helpers.numa[g.helper], &numa_bytes)) AddOnce(&lessees, c.id);
      continue;
    }
    on_helper[g.helper] += Lend(c, helpers.gpu[g.helper], g.bytes, options, &owners, &lessees);
  }
  for (std::size_t h = 0; h < helpers.helpers.size(); ++h) {
    metrics_
        ->Helper(helpers.gpu[h].empty() ? "numa " + std::to_string(helpers.numa[h])
                                        : "gpu " + helpers.gpu[h])
        .Set(double(on_helper[h]));
  }
  for (std::uint32_t id : owners) AddOnce(republish, id);
  for (std::uint32_t id : lessees) AddOnce(republish, id);
}

bool NodeLending::ChooseNuma(std::uint32_t client, std::uint64_t bytes, int numa,
                             std::map<std::uint32_t, std::uint64_t>* numa_bytes) {
  // Most of its host share goes to one node; only a node with several NUMA nodes names one in
  // the policy (Decorate), so only there does a change need a republish.
  if (bytes <= (*numa_bytes)[client]) return false;
  (*numa_bytes)[client] = bytes;
  const auto known = numa_of_.find(client);
  const bool changed = numa_nodes_ > 1 && (known == numa_of_.end() || known->second != numa);
  numa_of_[client] = numa;
  return changed;
}

std::uint64_t NodeLending::Lend(const NodeClient& c, const std::string& gpu, std::uint64_t bytes,
                                const LendingOptions& options, std::vector<std::uint32_t>* owners,
                                std::vector<std::uint32_t>* lessees) {
  // Leases only where the lessee may borrow and can address the GPU itself (its own ordinal);
  // anything else stays with the host share. Room on its own other devices needs no permission.
  const auto lender = book_.gpus().find(gpu);
  const bool own_room =
      lender != book_.gpus().end() && lender->second.self_only && lender->second.owner == c.id;
  if ((!own_room && !options.borrowers.Allows(c.uid)) || OrdinalOf(c.devices, gpu) < 0) return 0;
  std::uint64_t held = 0;
  for (const Lease& lease : book_.Active(c.id)) held += lease.gpu == gpu ? lease.bytes : 0;
  // Grow towards the answer as far as the GPU's spare allows (another lessee may still hold
  // what this placement moved away from it), in whole chunks.
  const std::uint64_t more = WholeChunks(bytes > held ? bytes - held : 0, book_.Spare(gpu));
  const std::uint64_t id = more > 0 ? book_.Grant(gpu, c.id, more) : 0;
  if (id != 0) {
    const std::uint32_t owner = book_.leases().at(id).owner;
    spdlog::info("lease {}: {} more bytes of gpu {} (client {}) lent to client {}", id, more, gpu,
                 owner, c.id);
    AddOnce(owners, owner);
    AddOnce(lessees, c.id);
  }
  return std::max(held + (id != 0 ? more : 0), bytes);
}

std::vector<std::uint32_t> NodeLending::ClientGone(std::uint32_t id, std::uint64_t now_ns) {
  numa_of_.erase(id);
  last_inputs_.clear();  // the next round places the node afresh
  std::vector<std::uint32_t> republish;
  for (const auto& [lease_id, lease] : book_.leases()) {
    if (lease.lessee == id) AddOnce(&republish, lease.owner);  // active or revoking
  }
  for (std::uint32_t lessee : book_.ClientGone(id, now_ns)) AddOnce(&republish, lessee);
  return republish;
}

void NodeLending::Decorate(std::uint32_t id, const std::vector<ipc::DeviceFacts>& devices,
                           std::uint64_t device_limit, ipc::Policy* policy) const {
  const std::uint64_t lent = book_.LentBy(id);
  policy->summary.lent_bytes = lent;
  if (lent > 0) policy->summary.device_limit_bytes = device_limit;
  policy->leases.clear();
  struct Room {
    std::uint16_t helper;
    std::uint64_t bytes;
  };
  std::vector<Room> rooms;
  for (const Lease& lease : book_.Active(id)) {
    const int ordinal = OrdinalOf(devices, lease.gpu);
    if (ordinal < 0 || ordinal > 0xffff) continue;
    const auto helper = static_cast<std::uint16_t>(ordinal);
    policy->leases.push_back({lease.id, lease.bytes, helper, 0, 0});
    rooms.push_back({helper, lease.bytes});
  }
  // A NUMA node is named only on a node with more than one: on a single-node host "host" says it.
  const auto numa = numa_of_.find(id);
  const int host_numa = numa != numa_of_.end() && numa_nodes_ > 1 ? numa->second : -1;
  // Entries in plan order fill the leases first (the plan lists the earliest swaps first, which
  // have the least compute to hide behind), each taking its whole chunks there, as the shim's
  // buffer does; the rest go to the host share.
  for (ipc::SwapEntry& e : policy->entries) {
    e.tier = static_cast<std::uint16_t>(ipc::Tier::kHost);
    e.helper = 0;
    const std::uint64_t span = SwapSpan(e.bytes);
    auto room =
        std::find_if(rooms.begin(), rooms.end(), [&](const Room& r) { return r.bytes >= span; });
    if (room != rooms.end()) {
      e.tier = static_cast<std::uint16_t>(ipc::Tier::kPeerGpu);
      e.helper = room->helper;
      room->bytes -= span;
    } else if (host_numa >= 0) {
      e.tier = static_cast<std::uint16_t>(ipc::Tier::kHostNuma);
      e.helper = static_cast<std::uint16_t>(host_numa);
    }
  }
}

void NodeLending::Describe(nlohmann::json* out) const {
  nlohmann::json leases = nlohmann::json::array();
  for (const auto& [id, lease] : book_.leases()) {
    leases.push_back({{"id", id},
                      {"gpu", lease.gpu},
                      {"owner", lease.owner},
                      {"lessee", lease.lessee},
                      {"bytes", lease.bytes},
                      {"state", lease.state == Lease::State::kActive ? "active" : "revoking"},
                      {"omitted_generation", lease.omitted_generation}});
  }
  // Each GPU that has lent or may lend: "stopped" after a hung lessee (until another client owns
  // it), "paused" while its owner may not lend (asks memory back, swaps itself, left).
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& [bus, gpu] : book_.gpus()) {
    gpus.push_back({{"gpu", bus},
                    {"owner", gpu.owner},
                    {"state", gpu.stopped  ? "stopped"
                              : gpu.paused ? "paused"
                                           : "lending"},
                    {"spare_bytes", book_.Spare(bus)},
                    {"lent_bytes", book_.LentOn(bus)}});
  }
  nlohmann::json numa = nlohmann::json::object();
  for (const auto& [client, node] : numa_of_) numa[std::to_string(client)] = node;
  (*out)["leases"] = std::move(leases);
  (*out)["gpus"] = std::move(gpus);
  (*out)["revocations"] = {{"completed", completed_}, {"hung", hung_}};
  (*out)["placement"] = {{"cost_s", last_cost_}, {"error", last_error_}, {"numa", numa}};
}

}  // namespace chameleon::daemon
