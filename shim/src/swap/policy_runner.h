// Executes a decoded swap policy against the live op stream.
//
// The shim reports every op (kernel launch, copy, memset) with its token: BeforeOp(token, stream)
// before forwarding it to the driver and AfterOp(..., tensors) after. The runner counts
// occurrences of each token within the iteration and, at the anchors the policy names:
//   after  (out_token, out_occurrence):  bind the entry to one of the op's tensors, SwapOut it;
//   before (in_token, in_occurrence):    SwapIn(tensor)               - prefetch on the side
//   stream; before (use_token, use_occurrence):  WaitResident(tensor, stream) - the consumer waits.
//
// Binding. The out anchor is the tensor's last use before the gap, so the tensor IS one of that
// op's arguments: the entry names it by position (SwapEntry::out_arg, in the shim's record
// order). The runner checks the size (an allocation of exactly entry.bytes), falls back to the
// op's first tensor of that size, and otherwise ignores the entry for the iteration (counted in
// policy_ignored): a policy naming wrong or freed tensors never faults. Non-wrapping entries are
// unbound at each boundary; wrapping entries (kEntryWraps: swap-in and use in the next iteration)
// keep their binding across it, until their out anchor binds them again.
//
// Policies change only at iteration boundaries: SetPolicy stores a pending generation, which
// BeginIteration installs whole (the old one is never half-applied). Tensors the old generation
// left swapped out for a wrapping entry are prefetched at the switch, so the safety net rarely
// has to fault them in.
//
// Thread-safety: SetPolicy may be called from any thread (the shim's daemon client).
// BeginIteration, BeforeOp and AfterOp must be called by one thread at a time, in op order (the
// shim serialises them).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "swap/counters.h"
#include "swap/swap_engine.h"

namespace chameleon::shim::swap {

/// One tensor argument of an op, in the shim's record order.
struct OpTensor {
  AllocId id = 0;           ///< executor allocation; 0 = not swappable (passed through, pinned)
  std::uint64_t bytes = 0;  ///< the allocation's requested size
};

class PolicyRunner {
 public:
  PolicyRunner(SwapEngine* engine, SwapCounters* counters);

  /// Queues `policy` (a copy is compiled now); installed by the next BeginIteration.
  void SetPolicy(const ipc::Policy& policy);
  /// An iteration boundary: installs a pending policy, resets occurrences and bindings, and lets
  /// the engine perform deferred unmaps whose copies completed.
  void BeginIteration();
  /// Before an op: counts its occurrence, starts swap-ins and makes `stream` wait where the policy
  /// says. Returns the occurrence (0-based) to hand to AfterOp.
  std::uint32_t BeforeOp(std::uint32_t token, CUstream stream);
  /// After an op was queued on `stream`: binds the entries anchored on it to its `tensors` and
  /// starts their swap-outs.
  void AfterOp(std::uint32_t token, std::uint32_t occurrence, CUstream stream,
               std::span<const OpTensor> tensors);

  std::uint64_t generation() const { return installed_ ? installed_->generation : 0; }
  /// True when the installed policy has entries (the shim skips the runner otherwise).
  bool active() const { return installed_ && !installed_->entries.empty(); }
  std::uint64_t iteration() const { return iteration_; }

 private:
  struct Actions {
    std::vector<std::uint32_t> swap_in;  // entry indices
    std::vector<std::uint32_t> wait;
    std::vector<std::uint32_t> swap_out;
  };
  struct Compiled {
    std::uint64_t generation = 0;
    std::uint64_t predicted_stall_ns = 0;  // the plan's predicted stall per iteration
    std::vector<ipc::SwapEntry> entries;
    std::unordered_map<std::uint64_t, Actions> at;  // Anchor(token, occurrence) -> actions
  };
  static std::uint64_t Anchor(std::uint32_t token, std::uint32_t occurrence) {
    return (static_cast<std::uint64_t>(token) << 32) | occurrence;
  }
  AllocId BindAtOut(std::uint32_t entry, std::span<const OpTensor> tensors);
  void Ignore(std::uint32_t entry);

  SwapEngine* engine_;
  SwapCounters* counters_;
  std::mutex pending_mu_;
  std::shared_ptr<const Compiled> pending_;  // guarded by pending_mu_
  std::shared_ptr<const Compiled> installed_;
  std::unordered_map<std::uint32_t, std::uint32_t> occurrences_;
  std::vector<AllocId> bound_;      // per entry: allocation bound at its out anchor (0 = none)
  std::vector<std::uint8_t> dead_;  // per entry: ignored for the rest of this iteration
  std::uint64_t iteration_ = 0;
};

}  // namespace chameleon::shim::swap
