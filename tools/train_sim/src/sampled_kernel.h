// The model-shaped trainer's one kernel (docs/trainer.md, "Model-shaped mode"): it reads sampled
// words of up to five input tensors and writes sampled words of up to four output tensors, and
// costs whatever FLOPs, HBM bytes and link bytes the launch site says the real kernel it stands
// for would cost. Sampling keeps host RAM and wall time small at LLM scale (simgpu commits memory
// only for written bytes) while every 2 MiB granule of every tensor still carries a word whose
// value depends on the tensor, its offset, the step and everything upstream of it, so a lost,
// stale or misplaced range of any tensor changes the final checksum.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chameleon/simgpu/module_image.h"

namespace chameleon::train_sim {

inline constexpr std::size_t kSampleGranule = 2u << 20;  ///< one sampled word per 2 MiB
inline constexpr int kSampledInputs = 5;
inline constexpr int kSampledOutputs = 4;

/// Where each granule's sampled word lies inside the granule: the same offset in every granule,
/// away from its head (page 397 of 512), so a copy that moved only granule heads is still caught.
/// The same offset everywhere because the swap executor hands a freed or swapped-out tensor's
/// 2 MiB chunks to the next tensor: the chunk's stale word then sits in the very page its new
/// owner writes, and simgpu's copies overwrite that page instead of punching a hole for it and
/// faulting a fresh one in (docs/trainer.md, "Sampled kernels"; before, the offset depended on
/// the granule's index and a reused chunk held its stale word in another page). The value,
/// 1,629,668, is the old formula's offset for granule 0, so one-granule tensors sample as before.
inline constexpr std::size_t kSampleOffsetInGranule =
    (0x9e3779b97f4a7c15ull >> 40) % (kSampleGranule / 4) * 4;
static_assert(kSampleOffsetInGranule == 1629668);

/// Calls `visit(offset)` for every sampled 4-byte word of a `bytes`-long tensor, in increasing
/// order: the first word, one word per 2 MiB granule at kSampleOffsetInGranule (or the last word,
/// in a last granule shorter than that), and the last whole word (so the first and the last page
/// are always covered). Positions depend only on `bytes`, never on the address, so a producer and
/// a consumer of one tensor agree on them whatever the allocator did. Tensors under 4 bytes have
/// no sampled word.
template <class Visit>
void ForEachSampledWord(std::size_t bytes, Visit&& visit) {
  if (bytes < 4) return;
  const std::size_t last = (bytes / 4 - 1) * 4;
  std::size_t previous = 0;
  visit(std::size_t{0});
  for (std::size_t base = 0; base < bytes; base += kSampleGranule) {
    std::size_t offset = base + kSampleOffsetInGranule;
    if (offset > last) offset = last;
    if (offset > previous) {
      visit(offset);
      previous = offset;
    }
  }
  if (last > previous) visit(last);
}

/// Number of sampled words of a `bytes`-long tensor.
std::size_t SampledWordCount(std::size_t bytes);

/// The one-kernel module image handed to cuModuleLoadData. Parameters, in order: five inputs and
/// four outputs, each (P pointer|0, I bytes low 31 bits, I bytes >> 31); then I tag, I step,
/// F flops, F bytes, F link bytes. 32 parameters, simgpu's maximum.
const simgpu::ModuleImage& SampledModuleImage();

namespace kernels {
/// The host function: h = mix(tag, step, every sampled input word and its offset); output k's
/// word at offset o = mix(h, k, o). Inputs are all read before any output is written, so an
/// output may also be an input (in-place updates such as Adam's).
void Sampled(void* const* params, const simgpu::LaunchDims& dims);
}  // namespace kernels

}  // namespace chameleon::train_sim
