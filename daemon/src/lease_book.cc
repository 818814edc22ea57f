#include "chameleon/daemon/lease_book.h"

#include <algorithm>

namespace chameleon::daemon {

void LeaseBook::SetRules(std::uint64_t reserve_bytes, std::uint64_t deadline_ns) {
  reserve_ = reserve_bytes;
  deadline_ns_ = deadline_ns;
}

void LeaseBook::SetLender(const std::string& gpu, std::uint32_t owner, std::uint64_t capacity,
                          std::uint64_t peak, bool self_only) {
  Gpu& g = gpus_[gpu];
  // A new owner is a new process on the GPU: a lessee that hung on the old one's leases says
  // nothing about this one's.
  if (g.owner != owner) {
    g.stopped = false;
    g.peak = 0;
  }
  g.owner = owner;
  g.capacity = capacity;
  g.peak = std::max(g.peak, peak);  // the owner's peak so far: lending follows its high-water
  g.paused = false;
  g.self_only = self_only;
}

void LeaseBook::Pause(const std::string& gpu) {
  auto it = gpus_.find(gpu);
  if (it != gpus_.end()) it->second.paused = true;
}

std::uint64_t LeaseBook::Spare(const std::string& gpu) const {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end() || it->second.paused || it->second.stopped) return 0;
  const Gpu& g = it->second;
  const std::uint64_t used = g.peak + reserve_ + LentOn(gpu);
  return g.capacity > used ? g.capacity - used : 0;
}

std::uint64_t LeaseBook::Lendable(const std::string& gpu) const {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end() || it->second.paused || it->second.stopped) return 0;
  const std::uint64_t used = it->second.peak + reserve_;
  return it->second.capacity > used ? it->second.capacity - used : 0;
}

bool LeaseBook::Stopped(const std::string& gpu) const {
  auto it = gpus_.find(gpu);
  return it != gpus_.end() && it->second.stopped;
}

std::uint64_t LeaseBook::Grant(const std::string& gpu, std::uint32_t lessee, std::uint64_t bytes) {
  if (bytes == 0 || bytes > Spare(gpu)) return 0;
  const Gpu& g = gpus_.at(gpu);
  const std::uint32_t owner = g.owner;
  if (g.self_only ? owner != lessee : owner == lessee) return 0;
  for (auto& [id, lease] : leases_) {
    if (lease.gpu == gpu && lease.lessee == lessee && lease.state == Lease::State::kActive) {
      lease.bytes += bytes;
      return id;
    }
  }
  Lease lease;
  lease.id = next_id_++;
  lease.gpu = gpu;
  lease.owner = owner;
  lease.lessee = lessee;
  lease.bytes = bytes;
  leases_.emplace(lease.id, lease);
  return lease.id;
}

std::vector<std::uint32_t> LeaseBook::Revoke(const std::string& gpu, std::uint64_t now_ns) {
  std::vector<std::uint32_t> lessees;
  for (auto& [id, lease] : leases_) {
    if (lease.gpu != gpu || lease.state != Lease::State::kActive) continue;
    lease.state = Lease::State::kRevoking;
    lease.deadline_ns = now_ns + deadline_ns_;
    if (std::find(lessees.begin(), lessees.end(), lease.lessee) == lessees.end()) {
      lessees.push_back(lease.lessee);
    }
  }
  return lessees;
}

void LeaseBook::Published(std::uint32_t lessee, std::uint64_t generation) {
  for (auto& [id, lease] : leases_) {
    if (lease.lessee == lessee && lease.state == Lease::State::kRevoking &&
        lease.omitted_generation == 0) {
      lease.omitted_generation = generation;
    }
  }
}

std::vector<RevocationOutcome> LeaseBook::Applied(std::uint32_t lessee, std::uint64_t applied) {
  std::vector<RevocationOutcome> done;
  for (auto it = leases_.begin(); it != leases_.end();) {
    const Lease& lease = it->second;
    if (lease.lessee == lessee && lease.state == Lease::State::kRevoking &&
        lease.omitted_generation != 0 && applied >= lease.omitted_generation) {
      done.push_back({lease, false});
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  return done;
}

std::vector<RevocationOutcome> LeaseBook::Expire(std::uint64_t now_ns) {
  std::vector<RevocationOutcome> hung;
  for (auto it = leases_.begin(); it != leases_.end();) {
    const Lease& lease = it->second;
    if (lease.state == Lease::State::kRevoking && now_ns >= lease.deadline_ns) {
      hung.push_back({lease, true});
      auto gpu = gpus_.find(lease.gpu);
      if (gpu != gpus_.end() && gpu->second.owner == lease.owner) gpu->second.stopped = true;
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  return hung;
}

std::vector<std::uint32_t> LeaseBook::ClientGone(std::uint32_t client, std::uint64_t now_ns) {
  std::erase_if(leases_, [&](const auto& entry) { return entry.second.lessee == client; });
  std::vector<std::uint32_t> lessees;
  for (auto& [gpu, g] : gpus_) {
    if (g.owner != client) continue;
    g.paused = true;
    for (std::uint32_t lessee : Revoke(gpu, now_ns)) lessees.push_back(lessee);
  }
  return lessees;
}

std::vector<Lease> LeaseBook::Active(std::uint32_t lessee) const {
  std::vector<Lease> out;
  for (const auto& [id, lease] : leases_) {
    if (lease.lessee == lessee && lease.state == Lease::State::kActive) out.push_back(lease);
  }
  return out;
}

std::uint64_t LeaseBook::LentBy(std::uint32_t owner) const {
  std::uint64_t bytes = 0;
  for (const auto& [id, lease] : leases_) {
    bytes += lease.owner == owner && lease.lessee != owner ? lease.bytes : 0;
  }
  return bytes;
}

std::uint64_t LeaseBook::LentOn(const std::string& gpu) const {
  std::uint64_t bytes = 0;
  for (const auto& [id, lease] : leases_) bytes += lease.gpu == gpu ? lease.bytes : 0;
  return bytes;
}

}  // namespace chameleon::daemon
