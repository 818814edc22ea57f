// Finds the daemon's iteration boundary signature (a token n-gram) in the op token stream.
// A Knuth-Morris-Pratt automaton: one or two compares per op, no allocation. Not thread-safe: the
// owner (Telemetry) steps it under the ring lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace chameleon::shim {

class IterationMatcher {
 public:
  static constexpr std::size_t kMaxSignature = 32;

  /// Installs a new signature (empty = none). Longer signatures keep their last kMaxSignature
  /// tokens. Resets the match state.
  void SetSignature(std::span<const std::uint32_t> tokens);
  std::size_t length() const { return length_; }

  /// Feeds one op token; true when it completes an occurrence of the signature. Occurrences do
  /// not overlap: matching restarts after each one.
  bool Step(std::uint32_t token) {
    if (length_ == 0) return false;
    while (state_ > 0 && signature_[state_] != token) state_ = fail_[state_ - 1];
    if (signature_[state_] == token) ++state_;
    if (state_ == length_) {
      // Non-overlapping, like the daemon's tracker and detector: a run of identical ops longer
      // than the signature (ResNet's chunked launches) is one boundary, not one per extra op.
      state_ = 0;
      return true;
    }
    return false;
  }

 private:
  std::uint32_t signature_[kMaxSignature] = {};
  std::uint32_t fail_[kMaxSignature] = {};
  std::size_t length_ = 0;
  std::size_t state_ = 0;
};

}  // namespace chameleon::shim
