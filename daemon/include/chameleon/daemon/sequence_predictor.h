// SequencePredictor: which op sequence the iteration `ahead` steps after the last one cut will
// run, from the order in which the client's iterations ran so far.
//
// Why. A plan recalled when its sequence comes back (PlanMemory) is always late: the daemon knows
// an iteration's sequence when it cuts it, and the shim is then already in the next iteration,
// so the recalled plan is installed at the boundary after that. Every switch between sequences
// runs two iterations under the other sequence's plan. Loops that alternate do so on a schedule
// (an auxiliary branch on for K steps, an evaluation pass every N, gradient accumulation's
// optimizer step every k micro-batches), and a schedule can be read from the history: publish
// the plan of the sequence expected two iterations ahead, and the switch lands on time.
//
// How. Context matching, as in prefetchers and text predictors: take the last L keys of the
// history (the context), find where the same L keys ran before, and read what followed them
// `ahead` iterations later. The longest context that ran before predicts, if every earlier run
// of it was followed by the same sequence; runs that disagree predict nothing (nor would a
// shorter context: its runs include those).
//
// Trust. A guess that the loop switches (another sequence than the last one) costs an iteration
// under the wrong plan when it is wrong, as much as the late switch it saves. So every switch
// guess is scored when its iteration comes, whether or not it was used, and guesses are given
// out only while at most kMaxMisses of the last kScored were wrong: a loop that switches at
// random (a step skipped after an fp16 overflow) stops being predicted, a schedule is predicted
// again once its guesses come true again. A guess of no switch needs no trust: it changes
// nothing.
//
// Bounded: the last kHistory keys, contexts of at most kMaxContext, O(kHistory · kMaxContext²)
// key comparisons per Observe, once per iteration. Not thread-safe: the loop thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "chameleon/daemon/iteration_tracker.h"

namespace chameleon::daemon {

class SequencePredictor {
 public:
  static constexpr std::size_t kHistory = 128;
  static constexpr std::size_t kMaxContext = 16;
  static constexpr std::size_t kScored = 8;
  static constexpr std::size_t kMaxMisses = 1;

  /// `ahead` >= 1: how many iterations after the last one cut the guesses are for.
  explicit SequencePredictor(std::size_t ahead);

  /// The iteration just cut ran `sequence`: scores the switch guess made for it, and guesses
  /// again.
  void Observe(const SequenceKey& sequence);
  /// The sequence expected `ahead` iterations after the last one observed: the guess, where it
  /// is no switch or switch guesses are trusted; nullopt when the history does not say.
  std::optional<SequenceKey> Next() const;
  /// Forgets everything (the boundary changed: keys of the old cut name other sequences).
  void Clear();

  std::size_t size() const { return history_.size(); }
  /// Switch guesses scored so far, and of them wrong (used or not).
  std::uint64_t switches_scored() const { return switches_scored_; }
  std::uint64_t switch_misses() const { return switch_misses_; }

 private:
  struct Guess {
    std::uint64_t position;  // the index of the iteration it is for (0 = the first observed)
    SequenceKey sequence;
    bool is_switch;  // not the sequence last observed when it was made
  };
  /// Context matching over the history (above).
  std::optional<SequenceKey> Match() const;
  /// Whether the `length` keys ending at `end` (inclusive) equal the last `length` keys.
  bool ContextAt(std::size_t end, std::size_t length) const;
  bool Trusted() const;

  std::size_t ahead_;
  std::deque<SequenceKey> history_;  // oldest first
  std::uint64_t observed_ = 0;       // keys observed since the last Clear
  std::deque<Guess> guesses_;        // for iterations still to come, oldest first
  std::deque<bool> outcomes_;        // the last kScored switch guesses: true = it came true
  std::uint64_t switches_scored_ = 0;
  std::uint64_t switch_misses_ = 0;
};

}  // namespace chameleon::daemon
