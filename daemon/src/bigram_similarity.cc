#include "chameleon/daemon/bigram_similarity.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace chameleon::daemon {

BigramCounts::BigramCounts(std::size_t initial_capacity) {
  const std::size_t capacity = std::bit_ceil(initial_capacity < 16 ? 16 : initial_capacity);
  slots_.assign(capacity, Slot{0, 0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
}

std::size_t BigramCounts::SlotIndex(std::uint64_t key) const {
  // Fibonacci hashing: the high bits of the product mix every bit of the key.
  return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> shift_);
}

std::uint32_t BigramCounts::Increment(std::uint64_t key) {
  // Keep the load factor at or below one half so probe sequences stay short.
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  for (std::size_t i = SlotIndex(key);; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.epoch != epoch_) {
      slot = Slot{key, 1, epoch_};
      ++size_;
      return 1;
    }
    if (slot.key == key) return ++slot.count;
  }
}

std::uint32_t BigramCounts::Get(std::uint64_t key) const {
  for (std::size_t i = SlotIndex(key);; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.epoch != epoch_) return 0;
    if (slot.key == key) return slot.count;
  }
}

void BigramCounts::Clear() {
  size_ = 0;
  if (++epoch_ == 0) {
    // The stamp wrapped: old stamps could alias the new one, so wipe them (every 2^32 clears).
    std::memset(static_cast<void*>(slots_.data()), 0, slots_.size() * sizeof(Slot));
    epoch_ = 1;
  }
}

void BigramCounts::Grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  const std::size_t capacity = old.size() * 2;
  slots_.assign(capacity, Slot{0, 0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& slot : old) {
    if (slot.epoch != epoch_) continue;
    std::size_t i = SlotIndex(slot.key);
    while (slots_[i].epoch == epoch_) i = (i + 1) & mask_;
    slots_[i] = slot;
  }
}

IterationComparison Judge(double similarity, std::uint64_t previous_ops, std::uint64_t ops,
                          const StabilityThresholds& thresholds) {
  IterationComparison result;
  result.has_previous = true;
  result.similarity = similarity;
  result.previous_ops = previous_ops;
  result.ops = ops;
  const double diff = ops > previous_ops ? double(ops - previous_ops) : double(previous_ops - ops);
  result.length_change = previous_ops == 0 ? (ops == 0 ? 0.0 : 1.0) : diff / double(previous_ops);
  result.stable =
      similarity > thresholds.similarity && result.length_change < thresholds.length_change;
  return result;
}

namespace {

double Cosine(std::uint64_t dot, std::uint64_t norm_a, std::uint64_t norm_b) {
  if (norm_a == 0 || norm_b == 0) return norm_a == norm_b ? 1.0 : 0.0;
  const double value = double(dot) / std::sqrt(double(norm_a) * double(norm_b));
  return value > 1.0 ? 1.0 : value;  // rounding must not make a perfect match exceed 1
}

}  // namespace

IterationComparison IterationComparator::Finish(const StabilityThresholds& thresholds) {
  IterationComparison result;
  if (has_previous_) {
    result =
        Judge(Cosine(dot_, previous_norm_, current_norm_), previous_ops_, current_ops_, thresholds);
  } else {
    result.ops = current_ops_;
  }
  // The current vector becomes the previous one; the old previous table is recycled.
  std::swap(previous_, current_);
  current_.Clear();
  previous_norm_ = current_norm_;
  previous_ops_ = current_ops_;
  current_norm_ = 0;
  current_ops_ = 0;
  dot_ = 0;
  last_ = kIterationStartToken;
  has_previous_ = true;
  return result;
}

void IterationComparator::DiscardCurrent() {
  current_.Clear();
  current_norm_ = dot_ = 0;
  current_ops_ = 0;
  last_ = kIterationStartToken;
}

void IterationComparator::Reset() {
  previous_.Clear();
  current_.Clear();
  previous_norm_ = current_norm_ = dot_ = 0;
  previous_ops_ = current_ops_ = 0;
  last_ = kIterationStartToken;
  has_previous_ = false;
}

IterationComparison CompareIterations(std::span<const std::uint32_t> previous,
                                      std::span<const std::uint32_t> current,
                                      const StabilityThresholds& thresholds) {
  BigramCounts a(previous.size() * 2), b(current.size() * 2);
  std::uint64_t norm_a = 0, norm_b = 0, dot = 0;
  std::uint32_t last = kIterationStartToken;
  for (std::uint32_t token : previous) {
    norm_a += 2 * std::uint64_t{a.Increment(BigramKey(last, token))} - 1;
    last = token;
  }
  last = kIterationStartToken;
  for (std::uint32_t token : current) {
    const std::uint64_t key = BigramKey(last, token);
    norm_b += 2 * std::uint64_t{b.Increment(key)} - 1;
    dot += a.Get(key);
    last = token;
  }
  return Judge(Cosine(dot, norm_a, norm_b), previous.size(), current.size(), thresholds);
}

}  // namespace chameleon::daemon
