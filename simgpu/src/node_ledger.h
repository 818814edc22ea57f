// The node-wide capacity ledger (SIMGPU_NODE): every process of one simulated node charges the
// node devices' memory in one shared file, so that a process allocating on device 1 takes memory
// the process that owns device 1 can no longer get, as on a real GPU. Layout: node_ledger_layout.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "node_ledger_layout.h"

namespace chameleon::simgpu {

/// One process's view of a node ledger. Thread-safe: Charge and Release are lock-free atomics
/// (a CAS against the device's capacity); ReclaimStale coordinates with other processes by CAS on
/// each slot's owner word. A process SIGKILLed while holding memory leaves its slot behind; the
/// first charge that finds a device full (and every Open) returns such slots' bytes.
class NodeLedger {
 public:
  /// What every process of one node must agree on; a ledger made for another is refused.
  struct Identity {
    std::string machine;                  ///< SIMGPU_MACHINE's name
    std::vector<std::uint64_t> capacity;  ///< bytes of each node device (1..16 of them)
  };

  /// Opens (or creates) the ledger of node `name` for this user, validates it against `id` and
  /// claims a process slot. Returns "" and sets `out`, or a message for cuInit's error line.
  static std::string Open(const std::string& name, const Identity& id,
                          std::unique_ptr<NodeLedger>* out);
  /// The file a node's ledger lives in: /dev/shm/simgpu-node-<name>-<uid>.
  static std::string PathFor(const std::string& name);

  ~NodeLedger();
  NodeLedger(const NodeLedger&) = delete;
  NodeLedger& operator=(const NodeLedger&) = delete;

  /// Takes `bytes` of node device `device`; false (nothing taken) if the node has not that much
  /// left. Lock-free, no syscall.
  bool Charge(int device, std::uint64_t bytes);
  /// Gives back `bytes` this process took; never more than its slot holds, so that a bad caller
  /// cannot give back another process's bytes (Device::Uncharge keeps a fork child's frees of
  /// inherited memory away from here: the parent still holds that memory).
  void Release(int device, std::uint64_t bytes);
  /// Bytes of `device` in use by all processes of the node.
  std::uint64_t Used(int device) const;
  /// Returns the bytes of every slot whose process is gone. Reads /proc: not for a hot path.
  std::uint64_t ReclaimStale();
  /// In a fork child: takes a slot of its own. False if none is free (charges then fail).
  bool ReattachInChild();
  const std::string& path() const { return path_; }

 private:
  NodeLedger(LedgerFile* file, std::string path) : file_(file), path_(std::move(path)) {}
  bool ClaimSlot();
  /// Returns `slot`'s bytes if its owner (as read in `owner`) is gone.
  std::uint64_t ReclaimIfStale(LedgerSlot* slot, std::uint64_t owner);

  LedgerFile* file_;
  std::string path_;
  std::atomic<LedgerSlot*> slot_{nullptr};
};

}  // namespace chameleon::simgpu
