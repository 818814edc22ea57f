#include "swap/lease_settler.h"

#include <map>

namespace chameleon::shim::swap {

void LeaseSettler::Apply(std::span<const ipc::LeaseGrant> leases, std::uint64_t generation) {
  destinations_->SetLeases(leases);
  generation_ = generation;
  pending_ = true;
  Settle();
}

void LeaseSettler::Settle() {
  if (!pending_) return;
  destinations_->Trim();  // idle buffers beyond the caps whose last copy is done
  // Per helper, the bytes still beyond its cap once the moves queued now have freed theirs.
  std::map<std::uint16_t, std::uint64_t> moving;
  table_->ForEach([&](Allocation& a) {
    if (a.state != Residency::kSwappedOut || a.where.tier != ipc::Tier::kPeerGpu) return;
    const std::uint16_t helper = a.where.helper;
    if (destinations_->OverCap(helper) <= moving[helper]) return;
    // A full host pool leaves it where it is: the next boundary tries again (the generation is
    // not reported meanwhile, so the daemon knows the revocation has not completed).
    if (transfers_->MoveToHost(&a) == CUDA_SUCCESS) moving[helper] += a.span;
  });
  destinations_->Trim();
  if (!destinations_->WithinCaps()) return;
  base_.counters->leases_applied_generation.store(generation_, std::memory_order_relaxed);
  pending_ = false;
}

}  // namespace chameleon::shim::swap
