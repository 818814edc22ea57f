// Cuts a client's op stream into iterations at the boundary signature, compares each iteration
// with the previous one and steps the stage machine.
//
// The signature is matched on the stream as it arrives. Ops are handed to the comparator with a
// delay of (signature length - 1) so that a new iteration starts with the signature's first op.
// Two repairs keep a few percent of inserted or removed ops from looking like shifts: a signature
// occurrence less than half an iteration after the last cut is an inserted op, not a boundary;
// an iteration twice as long as the previous one (within the tolerance) lost its boundary op and
// is discarded rather than compared.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "chameleon/daemon/bigram_similarity.h"
#include "chameleon/daemon/options.h"
#include "chameleon/daemon/stage_machine.h"
#include "chameleon/policy/fnv1a.h"

namespace chameleon::daemon {

/// An iteration's exact op sequence, condensed: a 64-bit FNV-1a of its tokens in order, and their
/// count. Equal sequences give equal keys. Two different ones with equal keys are a 2^-64
/// accident, and what follows from a key (a remembered plan, plan_memory.h) is only a plan: the
/// shim's safety net keeps the data whole whatever it names.
struct SequenceKey {
  std::uint64_t hash = policy::kFnv1aOffset;
  std::uint64_t ops = 0;
  void Add(std::uint32_t token) {
    hash = policy::Fnv1a(hash, token, sizeof(token));
    ++ops;
  }
  bool operator==(const SequenceKey&) const = default;
};

/// One finished iteration.
struct IterationEvent {
  std::uint64_t index = 0;  ///< 1 = the first iteration cut
  std::uint64_t ops = 0;
  IterationComparison comparison;
  StageStep step;
  bool discarded = false;  ///< lost boundary: merged with its successor, not compared
  SequenceKey sequence;    ///< its op sequence (empty when discarded)
};

/// Not thread-safe. Movable, so a worker thread can build one from a history snapshot.
class IterationTracker {
 public:
  static constexpr std::size_t kMaxSignature = 8;
  static constexpr std::size_t kShiftLog = 256;

  IterationTracker(std::vector<std::uint32_t> signature, const DetectionOptions& options);

  /// Feeds one op token; true when it finished an iteration (see last_event()).
  bool Add(std::uint32_t token);

  /// Takes the stability thresholds, gap tolerance and stage m/n of `options` from the next
  /// iteration on (a live config reload); the signature, counts and stage are kept.
  void UpdateOptions(const DetectionOptions& options) {
    thresholds_ = {options.similarity_threshold, options.length_change_threshold};
    tolerance_ = options.gap_tolerance;
    machine_.SetThresholds(options.stage_m, options.stage_n);
  }

  /// Keeps GEN_POLICY past stage_n (StageMachine::SetGenPolicyHold).
  void SetGenPolicyHold(bool hold, int max_extra) { machine_.SetGenPolicyHold(hold, max_extra); }
  /// The hold was let go between two cuts (StageMachine::Release): STABLE now if GEN_POLICY was
  /// held past stage_n, logged at the number of iterations cut so far.
  StageStep ReleaseHold();
  /// The last iteration cut repeats a sequence whose plan the session remembered
  /// (StageMachine::Resume): STABLE now, logged at the number of iterations cut so far.
  StageStep ResumeStable();
  /// The last iteration cut repeats a sequence whose GEN_POLICY was cut short, its trials kept
  /// (StageMachine::ResumePlanning): GEN_POLICY again, nearly done.
  StageStep ResumePlanning() { return machine_.ResumePlanning(); }
  /// STABLE's plan runs short under a repeated variant of its sequence (StageMachine::Replan):
  /// GEN_POLICY again.
  StageStep ReplanVariant() { return machine_.Replan(); }

  const IterationEvent& last_event() const { return last_event_; }
  /// The op sequence of the last iteration that was compared (not discarded).
  const SequenceKey& last_sequence() const { return last_sequence_; }
  const std::vector<std::uint32_t>& signature() const { return signature_; }
  Stage stage() const { return machine_.stage(); }
  int held_steps() const { return machine_.held_steps(); }
  std::uint64_t shifts() const { return machine_.shifts(); }
  std::uint64_t iterations() const { return iterations_; }
  std::uint64_t discarded() const { return discarded_; }
  std::uint64_t ignored_matches() const { return ignored_matches_; }
  /// Ops of the last iteration that was compared (0 before the first one finished).
  std::uint64_t iteration_ops() const { return iteration_ops_; }
  /// Iterations cut when the stage first became STABLE (0: not yet): the index of the iteration
  /// whose step moved it, or of the last one cut before a released hold moved it.
  std::uint64_t first_stable_iteration() const { return first_stable_iteration_; }
  /// Ops seen since the last cut (or since the start when nothing was cut yet).
  std::uint64_t ops_since_boundary() const { return ops_since_boundary_; }
  /// Iteration indices at which shifts were detected (the most recent kShiftLog).
  const std::deque<std::uint64_t>& shift_log() const { return shift_log_; }
  /// Iteration indices at which the stage became STABLE (the most recent kShiftLog): with the
  /// shift log, how long each stable sequence took to converge.
  const std::deque<std::uint64_t>& stable_log() const { return stable_log_; }

 private:
  bool Matches() const;
  bool Cut();
  /// Logs an entry into STABLE at iteration `index`.
  void NoteStable(std::uint64_t index);
  void FeedOldestPending();
  /// Adds one op to the current iteration (comparator and sequence key).
  void Feed(std::uint32_t token) {
    comparator_.Add(token);
    sequence_.Add(token);
  }

  std::vector<std::uint32_t> signature_;
  StabilityThresholds thresholds_;
  double tolerance_;
  IterationComparator comparator_;
  SequenceKey sequence_;  // of the current iteration, as fed to the comparator
  StageMachine machine_;
  std::array<std::uint32_t, kMaxSignature> pending_{};  // the last ops, not yet compared
  std::size_t pending_size_ = 0;
  bool started_ = false;
  std::uint64_t iterations_ = 0;
  std::uint64_t discarded_ = 0;
  std::uint64_t ignored_matches_ = 0;
  std::uint64_t iteration_ops_ = 0;
  std::uint64_t ops_since_boundary_ = 0;
  std::uint64_t first_stable_iteration_ = 0;
  IterationEvent last_event_;
  SequenceKey last_sequence_;
  std::deque<std::uint64_t> shift_log_;
  std::deque<std::uint64_t> stable_log_;
};

}  // namespace chameleon::daemon
