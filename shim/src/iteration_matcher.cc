#include "iteration_matcher.h"

namespace chameleon::shim {

void IterationMatcher::SetSignature(std::span<const std::uint32_t> tokens) {
  if (tokens.size() > kMaxSignature) tokens = tokens.subspan(tokens.size() - kMaxSignature);
  length_ = tokens.size();
  state_ = 0;
  for (std::size_t i = 0; i < length_; ++i) signature_[i] = tokens[i];
  if (length_ == 0) return;
  // Classic KMP failure function: fail_[i] = length of the longest proper border of sig[0..i].
  fail_[0] = 0;
  std::uint32_t k = 0;
  for (std::size_t i = 1; i < length_; ++i) {
    while (k > 0 && signature_[i] != signature_[k]) k = fail_[k - 1];
    if (signature_[i] == signature_[k]) ++k;
    fail_[i] = k;
  }
}

}  // namespace chameleon::shim
