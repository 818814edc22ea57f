// Process-wide simulated driver state: devices, primary contexts, the address registry and the
// virtual clocks. Created once by cuInit and never destroyed (worker threads may still run while
// static destructors do at exit).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "config.h"
#include "node_ledger.h"
#include "registry.h"

namespace chameleon::simgpu {

class Stream;

/// A monotonically advancing virtual time in ns. Thread-safe (lock-free).
class VirtualClock {
 public:
  std::uint64_t Now() const { return ns_.load(std::memory_order_acquire); }
  void Advance(std::uint64_t d) { ns_.fetch_add(d, std::memory_order_acq_rel); }
  /// ns = max(ns, t).
  void RaiseTo(std::uint64_t t) {
    std::uint64_t cur = ns_.load(std::memory_order_relaxed);
    while (cur < t && !ns_.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) {
    }
  }

 private:
  std::atomic<std::uint64_t> ns_{0};
};

/// One direction of one link (host->device, device->host, or device a -> device b). Copies that
/// overlap in virtual time share it fairly: a copy starting while n others are in flight gets
/// 1/(n+1) of the bandwidth for its whole duration; copies already scheduled keep their times.
/// Thread-safe.
class Link {
 public:
  /// Duration in ns of moving `bytes` starting at virtual time `start`; records the transfer.
  std::uint64_t Schedule(std::uint64_t start, double bytes, double bandwidth,
                         std::uint64_t prune_before);
  /// Like Schedule for a transfer that crosses two links in turn (a device reading host memory
  /// of another NUMA node: the host link, then the inter-socket one): it runs at the slower of
  /// its fair shares of the two and is recorded on both.
  static std::uint64_t ScheduleOnTwo(Link& a, double bandwidth_a, Link& b, double bandwidth_b,
                                     std::uint64_t start, double bytes, std::uint64_t prune_before);

 private:
  /// With mu_ held: drops transfers ended by `prune_before`; counts those in flight at `start`
  /// plus the new one.
  std::uint64_t SharersLocked(std::uint64_t start, std::uint64_t prune_before);
  void RecordLocked(std::uint64_t start, std::uint64_t duration);

  std::mutex mu_;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> busy_;  // [start, end) of scheduled copies
};

struct Context;

/// A simulated GPU. Thread-safe: counters are atomics, links lock internally.
struct Device {
  int ordinal = 0;
  int node_index = 0;  ///< which device of the simulated node (CUDA_VISIBLE_DEVICES)
  std::uint64_t capacity = 0;
  NodeLedger* ledger = nullptr;  ///< SIMGPU_NODE: capacity is charged node-wide there
  std::atomic<std::uint64_t> live{0};
  std::atomic<std::uint64_t> peak{0};
  std::atomic<std::uint64_t> pending_free{0};        ///< cuMemFreeAsync bytes not yet executed
  std::atomic<std::uint64_t> pending_plain_free{0};  ///< of which cuMemAlloc'd (no pool)
  VirtualClock frontier;  ///< max end time of any work submitted to this device
  Context* primary = nullptr;
  Link h2d, d2h;
  std::unique_ptr<Link[]> peer_out;  ///< indexed by destination device

  /// Reserves `bytes` of capacity; false (nothing charged) if it would exceed the capacity (of
  /// the node device, shared with the node's other processes, with a ledger).
  bool Charge(std::uint64_t bytes);
  /// Gives back `bytes` charged in `epoch` (ChargeEpoch() then): memory a fork child inherited
  /// stays charged to its parent in the node ledger, which still holds it.
  void Uncharge(std::uint64_t bytes, std::uint32_t epoch);
  /// Bytes of the device in use: by this process, or with a ledger by the whole node.
  std::uint64_t InUse() const;
};

inline constexpr std::uint32_t kContextMagic = 0x43545843u;

/// A (primary) context. Sticky errors live here, as on a GPU. Thread-safe.
struct Context {
  std::uint32_t magic = kContextMagic;
  Device* device = nullptr;
  std::atomic<int> sticky{CUDA_SUCCESS};
  std::mutex mu;                                 ///< guards the fields below
  std::vector<std::shared_ptr<Stream>> streams;  ///< every live stream, legacy included
  std::shared_ptr<Stream> legacy;
  int retain_count = 0;
  unsigned flags = 0;

  CUresult Sticky() const { return static_cast<CUresult>(sticky.load(std::memory_order_acquire)); }
  void SetSticky(CUresult r) {
    int expected = CUDA_SUCCESS;
    sticky.compare_exchange_strong(expected, r, std::memory_order_acq_rel);
  }
};

/// Immutable after cuInit except for the thread-safe members.
struct Driver {
  Config config;
  std::vector<std::unique_ptr<Device>> devices;
  Registry registry;
  std::unique_ptr<NodeLedger> ledger;  ///< SIMGPU_NODE, else null
  /// Inter-socket links, [from * numa_count + to] (from != to): host memory of NUMA node `from`
  /// read by a device on node `to` crosses numa_links[from][to].
  std::unique_ptr<Link[]> numa_links;
  int numa_count = 0;
  std::atomic<std::uint64_t> pinned_live{0};
  std::atomic<std::uint64_t> pinned_peak{0};
};

/// The driver, or null before a successful cuInit.
Driver* TheDriver();
/// Makes `driver` the process's driver (init.h, once per process) with the host clock's per-call
/// cost.
void InstallDriver(Driver* driver, std::uint64_t host_call_ns);
VirtualClock& HostClock();
std::uint64_t HostCallNs();

/// The calling thread's current context (may be null).
Context*& CurrentContextSlot();
/// Current context for an API call: NOT_INITIALIZED / INVALID_CONTEXT / the sticky error.
CUresult CurrentContext(Context** out);
/// Which process a charge was made in: 0, plus one in each fork child (init.cc). Lock-free.
std::uint32_t ChargeEpoch();
void BeginChargeEpochInForkChild();
/// The inter-socket link from host NUMA node `from` to `to`, or null (same node, unknown node).
Link* NumaLink(int from, int to);
/// Validates a device ordinal after init.
CUresult GetDevice(CUdevice dev, Device** out);
/// Validates a context handle (null = current).
CUresult CheckContext(CUcontext ctx, Context** out);

void AddPinned(std::uint64_t bytes);
void SubPinned(std::uint64_t bytes);

}  // namespace chameleon::simgpu
