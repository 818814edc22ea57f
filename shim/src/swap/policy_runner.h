// Executes a decoded swap policy against the live op stream.
//
// The shim reports every op (kernel launch, copy, memset) with its token: BeforeOp(token, stream)
// before forwarding it to the driver and AfterOp(...) after. The runner counts occurrences of each
// token within the iteration and, at the anchors the policy names:
//   after  (out_token, out_occurrence):  SwapOut(tensor, stream)  - the op was the last use;
//   before (in_token, in_occurrence):    SwapIn(tensor)           - prefetch on the side stream;
//   before (use_token, use_occurrence):  WaitResident(tensor, stream) - the consumer waits.
// Entries are bound to live allocations by a caller-supplied resolver (the shim's matcher over
// policy::TensorFeatures), at the entry's first trigger in each iteration. An entry the resolver
// cannot place, or whose allocation has been freed, is ignored (counted): never a fault.
//
// Policies change only at iteration boundaries: SetPolicy stores a pending generation, which
// BeginIteration installs whole (the old one is never half-applied).
//
// Thread-safety: SetPolicy may be called from any thread (the shim's daemon client).
// BeginIteration, BeforeOp and AfterOp must be called by one thread at a time, in op order (the
// shim's launch path already serialises op numbering).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "swap/counters.h"
#include "swap/swap_engine.h"

namespace chameleon::shim::swap {

class PolicyRunner {
 public:
  /// Maps a policy entry onto a live allocation of the current iteration; 0 = no match.
  using Resolver = std::function<AllocId(const ipc::SwapEntry&)>;

  PolicyRunner(SwapEngine* engine, SwapCounters* counters, Resolver resolver);

  /// Queues `policy` (a copy is compiled now); installed by the next BeginIteration.
  void SetPolicy(const ipc::Policy& policy);
  /// An iteration boundary: installs a pending policy, resets occurrences and bindings, and lets
  /// the engine perform deferred unmaps whose copies completed.
  void BeginIteration();
  /// Before an op: counts its occurrence, starts swap-ins and makes `stream` wait where the policy
  /// says. Returns the occurrence (0-based) to hand to AfterOp.
  std::uint32_t BeforeOp(std::uint32_t token, CUstream stream);
  /// After an op was queued on `stream`: starts the swap-outs anchored on it.
  void AfterOp(std::uint32_t token, std::uint32_t occurrence, CUstream stream);

  std::uint64_t generation() const { return installed_ ? installed_->generation : 0; }
  std::uint64_t iteration() const { return iteration_; }

 private:
  struct Actions {
    std::vector<std::uint32_t> swap_in;  // entry indices
    std::vector<std::uint32_t> wait;
    std::vector<std::uint32_t> swap_out;
  };
  struct Compiled {
    std::uint64_t generation = 0;
    std::vector<ipc::SwapEntry> entries;
    std::unordered_map<std::uint64_t, Actions> at;  // Anchor(token, occurrence) -> actions
  };
  static std::uint64_t Anchor(std::uint32_t token, std::uint32_t occurrence) {
    return (static_cast<std::uint64_t>(token) << 32) | occurrence;
  }
  AllocId Bind(std::uint32_t entry);
  void Ignore(std::uint32_t entry);

  SwapEngine* engine_;
  SwapCounters* counters_;
  Resolver resolver_;
  std::mutex pending_mu_;
  std::shared_ptr<const Compiled> pending_;  // guarded by pending_mu_
  std::shared_ptr<const Compiled> installed_;
  std::unordered_map<std::uint32_t, std::uint32_t> occurrences_;
  std::vector<AllocId> bound_;      // per entry: allocation this iteration (0 = not yet)
  std::vector<std::uint8_t> dead_;  // per entry: ignored for the rest of this iteration
  std::uint64_t iteration_ = 0;
};

}  // namespace chameleon::shim::swap
