// ReserveFeedback: the plan's reserve (device memory it leaves free for what the profile does not
// show) raised from what the shim's executor did, rather than fixed in advance.
//
// Why: the reserve covers a difference between the plan's memory model and the executor's that is
// not fully found (docs/policy.md, "Reserve"). A fixed margin large enough for every run costs
// every run link time: at GPT-2 XL B8 S1024 at 0.75 of its peak on h200-sxm, 1 % of the limit
// (338 MB) is 7 ms of the out link a step against four chunks, 0.3696 s against 0.3637 s. The
// executor shows when a plan is short: it evicts (the safety net takes a tensor the plan counted
// on) in iterations run whole under that plan. So plans start with a small reserve, and when the
// chosen plan evicts in a steady iteration the session re-plans it with the next larger one.
//
// Steady: an interval (boundary k to k + 1) run under the chosen generation that is not the first
// under it. The first may evict for reasons that do not recur: entries whose out anchor ran under
// the previous generation have no tensor bound yet. The eviction count is the segment header's
// counter, read at each mark, so an interval's count lags like SwapTraffic's bytes.
//
// Levels: level 0 is the base reserve (configured, or DefaultReserveBytes); each level above
// takes the larger of twice the last, four chunks and 1 % of the limit, in whole chunks, up to an
// eighth of the limit. The level stays for the client's later plans (a shift re-plans with it):
// the executor's margin is a property of the process, not of one plan. Not thread-safe: only the
// loop thread touches it.
#pragma once

#include <cstdint>

namespace chameleon::daemon {

class ReserveFeedback {
 public:
  /// The reserve of `level` for a plan whose base reserve is `base` under `limit_bytes`, in
  /// chunks of `chunk_bytes` (at most limit / 8, and never below `base`).
  static std::uint64_t ReserveAt(std::uint32_t level, std::uint64_t base, std::uint64_t limit_bytes,
                                 std::uint64_t chunk_bytes);

  /// STABLE published `generation` as the plan to watch (0: none, nothing watched). A re-plan
  /// published under a new generation is watched from its own first interval on.
  void Watch(std::uint64_t generation);
  std::uint64_t watched() const { return watched_; }
  /// A mark of a boundary whose generation in force is `generation`, read while the shim's
  /// executor had evicted `evictions` times in total. True when the interval it ended was steady
  /// under the watched generation and evicted: the caller raises the
  /// level if the next reserve is larger. A counter that goes backwards (an untrusted client) is
  /// never read as an eviction.
  bool OnMark(std::uint64_t generation, std::uint64_t evictions);
  /// The next level is in force: the watched plan is to be re-planned with it, and nothing is
  /// watched until the re-plan is published (Watch).
  void Raise();
  std::uint32_t level() const { return level_; }
  /// A re-plan Raise() asked for is still to be handed to a worker.
  bool replan_wanted() const { return replan_wanted_; }
  /// The re-plan was handed to a worker (or given up: a shift re-plans everything anyway).
  void Replanning() { replan_wanted_ = false; }

 private:
  std::uint32_t level_ = 0;
  std::uint64_t watched_ = 0;
  std::uint64_t last_generation_ = 0;  // of the previous mark: the interval it began ran under it
  std::uint64_t last_evictions_ = 0;
  bool seen_mark_ = false;
  std::uint32_t intervals_under_watched_ = 0;
  bool replan_wanted_ = false;
};

}  // namespace chameleon::daemon
