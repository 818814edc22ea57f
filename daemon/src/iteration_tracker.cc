#include "chameleon/daemon/iteration_tracker.h"

#include <algorithm>
#include <utility>

namespace chameleon::daemon {

IterationTracker::IterationTracker(std::vector<std::uint32_t> signature,
                                   const DetectionOptions& options)
    : signature_(std::move(signature)),
      thresholds_{options.similarity_threshold, options.length_change_threshold},
      tolerance_(options.gap_tolerance),
      machine_(options.stage_m, options.stage_n) {
  if (signature_.size() > kMaxSignature) signature_.resize(kMaxSignature);
  if (signature_.empty()) signature_.push_back(0);
}

bool IterationTracker::Matches() const {
  const std::size_t k = signature_.size();
  return pending_size_ >= k &&
         std::equal(signature_.begin(), signature_.end(), pending_.begin() + (pending_size_ - k));
}

void IterationTracker::FeedOldestPending() {
  if (started_) Feed(pending_[0]);
  std::copy(pending_.begin() + 1, pending_.begin() + pending_size_, pending_.begin());
  --pending_size_;
}

bool IterationTracker::Add(std::uint32_t token) {
  pending_[pending_size_++] = token;
  ++ops_since_boundary_;
  bool finished = false;
  if (Matches()) {
    const std::uint64_t so_far = comparator_.current_ops() + pending_size_ - signature_.size();
    // A signature op inserted mid-iteration is not a boundary.
    const bool too_early = started_ && 2 * so_far < comparator_.previous_ops();
    if (too_early) {
      ++ignored_matches_;
    } else {
      // The ops before the signature still belong to the iteration that ends here.
      while (pending_size_ > signature_.size()) FeedOldestPending();
      finished = started_ && Cut();
      started_ = true;
      for (std::size_t i = 0; i < pending_size_; ++i) Feed(pending_[i]);
      pending_size_ = 0;
      ops_since_boundary_ = signature_.size();
      return finished;
    }
  }
  if (pending_size_ >= signature_.size()) FeedOldestPending();
  return finished;
}

bool IterationTracker::Cut() {
  IterationEvent event;
  const std::uint64_t ops = comparator_.current_ops();
  const std::uint64_t previous = comparator_.previous_ops();
  event.index = ++iterations_;
  event.ops = ops;
  // Twice the previous length: the boundary op of the middle cut was lost.
  const bool doubled = previous > 0 &&
                       double(ops) >= 2.0 * double(previous) * (1 - tolerance_ / 2) &&
                       double(ops) <= 2.0 * double(previous) * (1 + tolerance_ / 2);
  const SequenceKey sequence = std::exchange(sequence_, SequenceKey{});
  if (doubled) {
    comparator_.DiscardCurrent();
    event.discarded = true;
    ++discarded_;
    last_event_ = event;
    return true;
  }
  event.comparison = comparator_.Finish(thresholds_);
  event.sequence = sequence;
  last_sequence_ = sequence;
  iteration_ops_ = ops;
  if (event.comparison.has_previous) {
    event.step = machine_.Step(event.comparison.stable);
    if (event.step.after == Stage::kStable && event.step.changed()) NoteStable(event.index);
    if (event.step.shift) {
      shift_log_.push_back(event.index);
      if (shift_log_.size() > kShiftLog) shift_log_.pop_front();
    }
  } else {
    event.step.before = event.step.after = machine_.stage();
  }
  last_event_ = event;
  return true;
}

StageStep IterationTracker::ReleaseHold() {
  const StageStep step = machine_.Release();
  if (step.changed()) NoteStable(iterations_);
  return step;
}

StageStep IterationTracker::ResumeStable() {
  const StageStep step = machine_.Resume();
  if (step.changed()) NoteStable(iterations_);
  return step;
}

void IterationTracker::NoteStable(std::uint64_t index) {
  if (first_stable_iteration_ == 0) first_stable_iteration_ = index;
  stable_log_.push_back(index);
  if (stable_log_.size() > kShiftLog) stable_log_.pop_front();
}

}  // namespace chameleon::daemon
