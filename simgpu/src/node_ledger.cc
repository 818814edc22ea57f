// Charging (lock-free) and reclaiming of the node ledger. Opening and validating the shared file
// is in node_ledger_file.cc.
//
// Order of the two counters, chosen so that a process killed between them can only leak bytes
// (until the node restarts), never give back bytes it did not take: a charge raises the device's
// `used` first and the slot's bytes second; a release lowers the slot first and `used` second. A
// reclaimer subtracts exactly what the dead slot holds.
#include "node_ledger.h"

#include <unistd.h>

#include "process_start.h"

namespace chameleon::simgpu {
namespace {

// v -= min(v, bytes); returns what was subtracted. Saturating because the counters live in a
// file other processes write: a corrupted one must not wrap around.
std::uint64_t SubtractUpTo(std::atomic<std::uint64_t>& v, std::uint64_t bytes) {
  std::uint64_t cur = v.load(std::memory_order_relaxed);
  std::uint64_t take = 0;
  do {
    take = cur < bytes ? cur : bytes;
  } while (!v.compare_exchange_weak(cur, cur - take, std::memory_order_acq_rel));
  return take;
}

bool ValidDevice(int device) {
  return device >= 0 && static_cast<std::uint32_t>(device) < kLedgerMaxDevices;
}

}  // namespace

NodeLedger::~NodeLedger() = default;  // the mapping stays: worker threads may still release

bool NodeLedger::Charge(int device, std::uint64_t bytes) {
  LedgerSlot* slot = slot_.load(std::memory_order_acquire);
  if (!slot || !ValidDevice(device)) return false;
  const std::uint64_t capacity = file_->header.capacity[device];
  auto& used = file_->devices[device].used;
  std::uint64_t cur = used.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity || cur > capacity - bytes) return false;
  } while (!used.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel));
  slot->bytes[device].fetch_add(bytes, std::memory_order_acq_rel);
  return true;
}

void NodeLedger::Release(int device, std::uint64_t bytes) {
  LedgerSlot* slot = slot_.load(std::memory_order_acquire);
  if (!slot || !ValidDevice(device)) return;
  const std::uint64_t held = SubtractUpTo(slot->bytes[device], bytes);
  SubtractUpTo(file_->devices[device].used, held);
}

std::uint64_t NodeLedger::Used(int device) const {
  if (!ValidDevice(device)) return 0;
  return file_->devices[device].used.load(std::memory_order_acquire);
}

std::uint64_t NodeLedger::ReclaimIfStale(LedgerSlot* slot, std::uint64_t owner) {
  const SlotState state = OwnerState(owner);
  const auto pid = static_cast<pid_t>(OwnerPid(owner));
  if (state == SlotState::kFree || slot == slot_.load(std::memory_order_relaxed)) return 0;
  const ProcessStatus status = ReadProcessStatus(pid);
  bool stale = true;  // an unknown state is a corrupted word: free the slot
  switch (state) {
    case SlotState::kLive:  // gone, or the pid now names a later process
      stale =
          !status.running || status.start_time != slot->start_time.load(std::memory_order_acquire);
      break;
    case SlotState::kClaiming:  // no start time recorded yet: only its absence counts
    case SlotState::kReclaiming:
      stale = !status.running;
      break;
    case SlotState::kFree:
      break;
  }
  if (!stale) return 0;
  const std::uint64_t mine =
      SlotOwner(SlotState::kReclaiming, static_cast<std::uint32_t>(getpid()));
  // Only one reclaimer wins; a reclaimer that died half-way is itself reclaimed (state kReclaiming
  // with a dead pid), and the exchanges below make a second pass return only what is left.
  if (!slot->owner.compare_exchange_strong(owner, mine, std::memory_order_acq_rel)) return 0;
  std::uint64_t returned = 0;
  for (std::uint32_t d = 0; d < kLedgerMaxDevices; ++d) {
    const std::uint64_t b = slot->bytes[d].exchange(0, std::memory_order_acq_rel);
    returned += SubtractUpTo(file_->devices[d].used, b);
  }
  slot->start_time.store(0, std::memory_order_relaxed);
  slot->owner.store(0, std::memory_order_release);
  return returned;
}

std::uint64_t NodeLedger::ReclaimStale() {
  std::uint64_t returned = 0;
  for (auto& slot : file_->slots) {
    const std::uint64_t owner = slot.owner.load(std::memory_order_acquire);
    if (owner != 0) returned += ReclaimIfStale(&slot, owner);
  }
  return returned;
}

bool NodeLedger::ClaimSlot() {
  const auto pid = static_cast<std::uint32_t>(getpid());
  const ProcessStatus self = ReadProcessStatus(static_cast<pid_t>(pid));
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& slot : file_->slots) {
      std::uint64_t expected = 0;
      if (!slot.owner.compare_exchange_strong(expected, SlotOwner(SlotState::kClaiming, pid),
                                              std::memory_order_acq_rel))
        continue;
      // A freed slot holds no bytes (the reclaimer zeroed them); clear anyway so that a slot a
      // corrupted file left non-zero is not charged to us.
      for (auto& b : slot.bytes) b.store(0, std::memory_order_relaxed);
      slot.start_time.store(self.start_time, std::memory_order_relaxed);
      slot.owner.store(SlotOwner(SlotState::kLive, pid), std::memory_order_release);
      slot_.store(&slot, std::memory_order_release);
      return true;
    }
    if (pass == 0) ReclaimStale();  // full: a dead process's slot may be freed
  }
  return false;
}

bool NodeLedger::ReattachInChild() {
  slot_.store(nullptr, std::memory_order_release);  // the parent's slot stays the parent's
  return ClaimSlot();
}

}  // namespace chameleon::simgpu
