#include "chameleon/daemon/sequence_predictor.h"

#include <algorithm>

namespace chameleon::daemon {

SequencePredictor::SequencePredictor(std::size_t ahead) : ahead_(std::max<std::size_t>(ahead, 1)) {}

void SequencePredictor::Observe(const SequenceKey& sequence) {
  const std::uint64_t position = observed_++;
  while (!guesses_.empty() && guesses_.front().position <= position) {
    const Guess guess = guesses_.front();
    guesses_.pop_front();
    if (guess.position != position || !guess.is_switch) continue;
    const bool right = guess.sequence == sequence;
    ++switches_scored_;
    if (!right) ++switch_misses_;
    outcomes_.push_back(right);
    if (outcomes_.size() > kScored) outcomes_.pop_front();
  }
  history_.push_back(sequence);
  if (history_.size() > kHistory) history_.pop_front();
  if (const std::optional<SequenceKey> next = Match()) {
    guesses_.push_back({position + ahead_, *next, !(*next == sequence)});
  }
}

std::optional<SequenceKey> SequencePredictor::Next() const {
  if (guesses_.empty() || guesses_.back().position != observed_ - 1 + ahead_) return std::nullopt;
  const Guess& guess = guesses_.back();
  if (guess.is_switch && !Trusted()) return std::nullopt;
  return guess.sequence;
}

void SequencePredictor::Clear() {
  history_.clear();
  guesses_.clear();
  outcomes_.clear();
  observed_ = 0;
}

bool SequencePredictor::Trusted() const {
  return static_cast<std::size_t>(std::count(outcomes_.begin(), outcomes_.end(), false)) <=
         kMaxMisses;
}

bool SequencePredictor::ContextAt(std::size_t end, std::size_t length) const {
  const std::size_t last = history_.size() - 1;
  for (std::size_t k = 0; k < length; ++k) {
    if (!(history_[end - k] == history_[last - k])) return false;
  }
  return true;
}

std::optional<SequenceKey> SequencePredictor::Match() const {
  const std::size_t n = history_.size();
  if (n < ahead_ + 1) return std::nullopt;
  const std::size_t last = n - 1;
  // An earlier run of the context ends at `end` with its continuation known: end + ahead <= last.
  const std::size_t max_length = std::min(kMaxContext, last + 1 - ahead_);
  for (std::size_t length = max_length; length >= 1; --length) {
    std::optional<SequenceKey> seen;  // what followed every earlier run so far
    for (std::size_t end = last - ahead_ + 1; end-- > length - 1;) {
      if (!ContextAt(end, length)) continue;
      const SequenceKey& next = history_[end + ahead_];
      // Runs that disagree: the context does not decide, and a shorter one (whose runs include
      // these) does not either.
      if (seen && !(next == *seen)) return std::nullopt;
      seen = next;
    }
    if (seen) return seen;
  }
  return std::nullopt;
}

}  // namespace chameleon::daemon
