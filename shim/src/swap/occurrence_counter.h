// Per-token occurrence counts within the current iteration, taken in the event ring's order.
//
// Why the ring's order: the daemon builds a policy's anchors (token, occurrence) by counting each
// token's records in the order it drains them from the ring, from one iteration boundary (also
// found in ring order) to the next. The shim's ring append is already serialised (the telemetry's
// ring lock), so counting inside that same critical section, with the boundary advancing the
// epoch there too, gives every recorded op exactly the occurrence the daemon gave it, however
// many host threads launch. Counted exactly where the iteration matcher steps: a record dropped
// because the ring lock stayed busy is neither seen by the daemon nor counted; one dropped for a
// full ring is counted, like the matcher counts it (the daemon then sees the drop counter move).
//
// Count and NextEpoch run under the caller's ring lock (one writer at a time); Peek runs on any
// thread without a lock: it is what a launch reads, before its record is appended, to predict its
// occurrence (exact unless another thread appends the same token in between).
//
// Each slot is one 64-bit word, (epoch << 32) | count, so a boundary resets every token at once
// by bumping the epoch (a slot last written in an older epoch reads as 0), never by a sweep.
//
// Thread-safety: Count/NextEpoch serialised by the caller; Peek and epoch() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace chameleon::shim::swap {

/// An op's place in its iteration, in ring order.
struct OccurrenceTicket {
  std::uint32_t epoch = 0;       ///< the ring's iteration count when the op was appended
  std::uint32_t occurrence = 0;  ///< 0-based, among the ops of its token in that iteration
  bool valid = false;            ///< false: not counted (no ring append, or token out of range)
};

class OccurrenceCounter {
 public:
  /// Tokens counted: 16 Ki distinct kernel names and the built-in tokens (a large model has a
  /// few thousand names). Higher tokens are not counted, and so never trigger (128 KiB of slots).
  static constexpr std::uint32_t kMaxTokens = 1u << 14;

  OccurrenceCounter() : slots_(std::make_unique<std::atomic<std::uint64_t>[]>(kMaxTokens)) {}

  /// The op of `token` was appended to the ring (caller holds the ring lock).
  OccurrenceTicket Count(std::uint32_t token) {
    OccurrenceTicket t;
    CountInto(token, &t);
    return t;
  }
  /// Count, writing the ticket field by field into `*out` (the launch path's form). Assigning a
  /// returned ticket made GCC copy it through the stack with narrow stores and wider loads, a
  /// failed store-to-load forwarding that was ~40 % of the ring push's samples under perf
  /// (shim_bench's BM_LaunchShim).
  void CountInto(std::uint32_t token, OccurrenceTicket* out) {
    if (token >= kMaxTokens) {
      out->valid = false;
      return;
    }
    const std::uint32_t e = epoch_.load(std::memory_order_relaxed);
    const std::uint64_t w = slots_[token].load(std::memory_order_relaxed);
    const std::uint32_t c = Of(w, e);
    slots_[token].store((static_cast<std::uint64_t>(e) << 32) | (c + 1), std::memory_order_release);
    out->epoch = e;
    out->occurrence = c;
    out->valid = true;
  }
  /// An iteration boundary was appended (caller holds the ring lock).
  void NextEpoch() {
    epoch_.store(epoch_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  /// The occurrence the next op of `token` would get if appended now; invalid when a boundary
  /// was appended while reading (the caller then skips, and a later op catches up).
  OccurrenceTicket Peek(std::uint32_t token) const {
    if (token >= kMaxTokens) return {};
    const std::uint32_t e = epoch_.load(std::memory_order_acquire);
    const std::uint64_t w = slots_[token].load(std::memory_order_acquire);
    if (epoch_.load(std::memory_order_acquire) != e) return {};
    return {e, Of(w, e), true};
  }
  std::uint32_t epoch() const { return epoch_.load(std::memory_order_acquire); }

 private:
  static std::uint32_t Of(std::uint64_t w, std::uint32_t epoch) {
    return static_cast<std::uint32_t>(w >> 32) == epoch ? static_cast<std::uint32_t>(w) : 0;
  }

  std::atomic<std::uint32_t> epoch_{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> slots_;  // per token: (epoch << 32) | count
};

}  // namespace chameleon::shim::swap
