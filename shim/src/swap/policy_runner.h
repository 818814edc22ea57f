// Executes a decoded swap policy against the live op stream.
//
// The shim reports every op (kernel launch, copy, memset) with its token: BeforeOp(token, stream)
// before forwarding it to the driver and AfterOp(token, ticket, ..., tensors) after its record
// was appended to the event ring. Occurrences are counted in ring order by the runner's
// OccurrenceCounter (the telemetry counts under its ring lock: occurrence_counter.h says why),
// so they are the daemon's occurrences however many host threads launch. At the anchors the
// policy names:
//   after  (out_token, out_occurrence):  bind the entry to one of the op's tensors, SwapOut it;
//   before (in_token, in_occurrence):    SwapIn(tensor)               - prefetch on the side
//   stream; before (use_token, use_occurrence):  WaitResident(tensor, stream) - the consumer waits.
//
// Lock-free in steady state (docs/executor.md, "The launch path with a policy in force"): an op
// whose token has no trigger due costs a few plain loads and no lock. Before-anchors: each token
// keeps a cursor, (epoch, next before-anchor occurrence); an op whose predicted occurrence
// (OccurrenceCounter::Peek) reaches it takes the slow path, which fires every before-anchor from
// the cursor up to that occurrence and advances the cursor. So each fires exactly once, at the
// first op that reaches it (late, never twice, when two threads race on one token: the tensor is
// still right, the safety net makes the real consumer wait if needed). After-anchors: the op's
// exact ring ticket is looked up in the token's after-anchor bitmap (a range compare and one
// bit); only a hit locks, because the binding needs this very op's tensors.
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
// has to fault them in, unless the new generation swaps the same tensor over the boundary: then
// its entry takes the binding over (CarryWrappedBindings) and brings the tensor back at its own
// trigger. The same tensor is told by the same anchors, or, for a plan that comes back (the
// daemon recalls the plan of an op sequence that runs again), by what its entry had bound when
// that plan was last in force: two sequences' plans name one tensor by different anchors. Replaced
// tables are kept until the runner is destroyed, because a launch may still be reading one without
// a lock (a table is kilobytes; generations change tens of times in a run).
//
// Thread-safety: every method may be called from any thread. occurrences().Count/NextEpoch are
// the exception: one thread at a time, in ring order (the telemetry's ring lock).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "swap/counters.h"
#include "swap/occurrence_counter.h"
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
  /// An iteration boundary (after the ring's: occurrences().NextEpoch()): installs a pending
  /// policy, unbinds the iteration's entries, and lets the engine perform deferred unmaps whose
  /// copies completed.
  void BeginIteration();
  /// Before an op is forwarded: starts the swap-ins and makes `stream` wait where a before-anchor
  /// of `token` is due. Lock-free unless one is.
  void BeforeOp(std::uint32_t token, CUstream stream) {
    const Compiled* c = installed_.load(std::memory_order_acquire);
    if (c == nullptr || token >= c->tokens.size() || c->tokens[token].before.empty()) return;
    const OccurrenceTicket t = occurrences_.Peek(token);
    if (t.valid && t.occurrence >= NextBefore(*c, token, t.epoch)) FireBefore(c, token, t, stream);
  }
  /// True when the op with ring ticket `t` is an after-anchor (the caller then gathers its
  /// tensors for AfterOp). Lock-free.
  bool HasAfterTrigger(std::uint32_t token, const OccurrenceTicket& t) const {
    const Compiled* c = installed_.load(std::memory_order_acquire);
    return c != nullptr && t.valid && IsAfterAnchor(*c, token, t);
  }
  /// After an op was queued on `stream` and appended to the ring with ticket `t`: binds the
  /// entries anchored on it to its `tensors` and starts their swap-outs.
  void AfterOp(std::uint32_t token, const OccurrenceTicket& t, CUstream stream,
               std::span<const OpTensor> tensors);

  /// The ring-order occurrence counts (the telemetry counts into it under its ring lock).
  OccurrenceCounter& occurrences() { return occurrences_; }
  std::uint64_t generation() const {
    const Compiled* c = installed_.load(std::memory_order_acquire);
    return c != nullptr ? c->generation : 0;
  }
  /// True when the installed policy has entries (the shim skips the runner otherwise).
  bool active() const {
    const Compiled* c = installed_.load(std::memory_order_acquire);
    return c != nullptr && !c->entries.empty();
  }
  std::uint64_t iteration() const { return iteration_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint32_t kNone = ~0u;
  struct Actions {
    std::vector<std::uint32_t> swap_in;  // entry indices
    std::vector<std::uint32_t> wait;
    std::vector<std::uint32_t> swap_out;
  };
  /// A token's anchors, sorted and unique.
  struct TokenAnchors {
    std::vector<std::uint32_t> before;  // occurrences with swap-in or wait actions
    std::vector<std::uint32_t> after;   // occurrences with swap-out actions
  };
  /// A token's after-anchors as a bitmap over [after_first, after_first + after_span): the
  /// after-check of every op is one range compare and, inside the range, one bit.
  struct AfterBits {
    std::uint32_t after_first = 0;
    std::uint32_t after_span = 0;  // 0: no after-anchor
    std::uint32_t word = 0;        // its first word in Compiled::after_bits; kNone: no bitmap
  };
  /// Bitmap words a generation may use (2 MiB): a policy naming occurrences far apart (the
  /// daemon's input is untrusted) gets the sorted-list search for the tokens past the budget.
  static constexpr std::size_t kMaxAfterBitsWords = std::size_t{1} << 18;
  /// One generation, immutable once published, except the cursors (atomics).
  struct Compiled {
    std::uint64_t generation = 0;
    std::uint64_t predicted_stall_ns = 0;    // the plan's predicted stall per iteration
    std::uint64_t predicted_in_wait_ns = 0;  // the part of it waiting for swap-ins
    std::uint32_t first_epoch = 0;  // ring epoch it was installed in: older tickets are not its
    std::vector<ipc::SwapEntry> entries;
    std::vector<ipc::LeaseGrant> leases;            // the peer memory this generation may use
    std::unordered_map<std::uint64_t, Actions> at;  // Anchor(token, occurrence) -> actions
    std::vector<TokenAnchors> tokens;               // by token, up to the highest anchored
    std::vector<AfterBits> after;                   // by token, like `tokens`
    std::vector<std::uint64_t> after_bits;          // every token's bitmap, one after another
    // Per token: (epoch << 32) | next before-anchor occurrence not fired yet; another epoch
    // means "from the first" (so a boundary resets no cursor).
    std::unique_ptr<std::atomic<std::uint64_t>[]> cursor;
  };
  static std::uint64_t Anchor(std::uint32_t token, std::uint32_t occurrence) {
    return (static_cast<std::uint64_t>(token) << 32) | occurrence;
  }
  static std::uint32_t NextBefore(const Compiled& c, std::uint32_t token, std::uint32_t epoch) {
    const std::uint64_t w = c.cursor[token].load(std::memory_order_acquire);
    return static_cast<std::uint32_t>(w >> 32) == epoch ? static_cast<std::uint32_t>(w)
                                                        : c.tokens[token].before.front();
  }
  static bool IsAfterAnchor(const Compiled& c, std::uint32_t token, const OccurrenceTicket& t) {
    if (token >= c.after.size() || t.epoch < c.first_epoch) return false;
    const AfterBits& a = c.after[token];
    const std::uint32_t k = t.occurrence - a.after_first;  // below the first wraps past the span
    if (k >= a.after_span) return false;
    if (__builtin_expect(a.word == kNone, 0)) return IsListedAfterAnchor(c, token, t.occurrence);
    return ((c.after_bits[a.word + k / 64] >> (k % 64)) & 1) != 0;
  }
  static bool IsListedAfterAnchor(const Compiled& c, std::uint32_t token, std::uint32_t occurrence);
  static std::unique_ptr<Compiled> Compile(const ipc::Policy& policy);
  void FireBefore(const Compiled* c, std::uint32_t token, const OccurrenceTicket& t,
                  CUstream stream);
  AllocId BindAtOut(std::uint32_t entry, std::span<const OpTensor> tensors);
  /// At a generation switch: `(*carried)[j]` = the allocation bound to a wrapping entry i of
  /// `from` that is the same tensor as wrapping entry j of `to` (0: none), and `(*kept)[i]` set
  /// for each such i (its tensor stays where it is). The same tensor: the same out anchor,
  /// out_arg and bytes; else the tensor entry j's twin (EntryKey) had bound when last in force.
  void CarryWrappedBindings(const Compiled& from, const Compiled& to, std::vector<AllocId>* carried,
                            std::vector<bool>* kept);
  /// What `c`'s bound wrapping entries hold (wrapped_last_), as it leaves.
  void RememberWrapped(const Compiled& c);
  /// One entry's anchors and size: equal in two tables that plan one tensor the same way.
  static std::uint64_t EntryKey(const ipc::SwapEntry& e);
  /// wrapped_last_ is cleared past this many keys (each re-plan adds its entries).
  static constexpr std::size_t kMaxWrappedKeys = 1 << 16;
  void Ignore(std::uint32_t entry);

  SwapEngine* engine_;
  SwapCounters* counters_;
  OccurrenceCounter occurrences_;
  std::atomic<const Compiled*> installed_{nullptr};
  std::atomic<std::uint64_t> iteration_{0};
  std::mutex pending_mu_;
  std::unique_ptr<Compiled> pending_;  // guarded by pending_mu_
  // --- guarded by mu_ (the slow paths and BeginIteration) ---
  std::mutex mu_;
  std::vector<std::unique_ptr<Compiled>> tables_;  // every installed table (see header comment)
  std::vector<AllocId> bound_;      // per entry: allocation bound at its out anchor (0 = none)
  std::vector<std::uint8_t> dead_;  // per entry: ignored for the rest of this iteration
  // EntryKey of each wrapping entry of a generation switched away from -> the allocation it had
  // bound then.
  std::unordered_map<std::uint64_t, AllocId> wrapped_last_;
};

}  // namespace chameleon::shim::swap
