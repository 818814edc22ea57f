// The sampled kernel's coverage and sensitivity, on host buffers (no driver needed).
#include "sampled_kernel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace chameleon::train_sim {
namespace {

TEST(SampledKernelTest, ShouldSampleEveryGranuleAndBothEnds) {
  const std::size_t bytes = 5 * kSampleGranule + 12345;
  std::vector<std::size_t> offsets;
  ForEachSampledWord(bytes, [&](std::size_t o) { offsets.push_back(o); });
  ASSERT_FALSE(offsets.empty());
  EXPECT_EQ(offsets.front(), 0u);
  EXPECT_EQ(offsets.back(), (bytes / 4 - 1) * 4);
  std::vector<int> per_granule(6, 0);
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i] % 4, 0u);
    EXPECT_LT(offsets[i] + 4, bytes + 1);
    if (i > 0) {
      EXPECT_GT(offsets[i], offsets[i - 1]);
    }
    ++per_granule[offsets[i] / kSampleGranule];
  }
  for (int count : per_granule) EXPECT_GE(count, 1);
  EXPECT_EQ(SampledWordCount(bytes), offsets.size());
  EXPECT_EQ(SampledWordCount(3), 0u);
}

// Every granule's word at one offset, away from the head: a chunk that the swap executor hands
// from one tensor to another then holds its stale word in the page the new owner writes.
TEST(SampledKernelTest, ShouldSampleTheSameOffsetInsideEveryGranule) {
  const std::size_t bytes = 7 * kSampleGranule + 4096;
  std::vector<std::size_t> inside;
  ForEachSampledWord(bytes, [&](std::size_t o) {
    if (o != 0 && o != (bytes / 4 - 1) * 4) inside.push_back(o % kSampleGranule);
  });
  ASSERT_EQ(inside.size(), 7u);  // the short last granule holds only the last word
  for (std::size_t o : inside) EXPECT_EQ(o, kSampleOffsetInGranule);
  EXPECT_GE(kSampleOffsetInGranule, 4096u);  // not in the granule's first page
}

// Runs the kernel with one input and one output buffer; returns the output.
std::vector<std::uint32_t> RunKernel(std::vector<std::uint32_t>& in, std::int32_t tag,
                                     std::int32_t step) {
  std::vector<std::uint32_t> out(in.size(), 0);
  std::uint64_t pointers[9] = {};
  std::int32_t sizes[9][2] = {};
  pointers[0] = reinterpret_cast<std::uintptr_t>(in.data());
  pointers[5] = reinterpret_cast<std::uintptr_t>(out.data());
  const std::size_t bytes = in.size() * 4;
  for (int i : {0, 5}) {
    sizes[i][0] = static_cast<std::int32_t>(bytes & 0x7fffffff);
    sizes[i][1] = static_cast<std::int32_t>(bytes >> 31);
  }
  float costs[3] = {};
  void* params[32];
  int n = 0;
  for (int i = 0; i < 9; ++i) {
    params[n++] = &pointers[i];
    params[n++] = &sizes[i][0];
    params[n++] = &sizes[i][1];
  }
  params[n++] = &tag;
  params[n++] = &step;
  for (float& c : costs) params[n++] = &c;
  kernels::Sampled(params, simgpu::LaunchDims{});
  return out;
}

TEST(SampledKernelTest, ShouldBeDeterministicAndSensitiveToEverySampledWord) {
  std::vector<std::uint32_t> in(3 * kSampleGranule / 4, 7);
  const auto reference = RunKernel(in, 5, 1);
  EXPECT_EQ(RunKernel(in, 5, 1), reference);
  EXPECT_NE(RunKernel(in, 6, 1), reference);  // another op
  EXPECT_NE(RunKernel(in, 5, 2), reference);  // another step
  // Writes only sampled words: the rest of the output stays as it was (zero).
  std::size_t written = 0;
  for (std::uint32_t w : reference) written += w != 0;
  EXPECT_EQ(written, SampledWordCount(in.size() * 4));
  // Zeroing any one granule of the input (a lost swap range) changes every sampled output word.
  for (std::size_t granule = 0; granule < 3; ++granule) {
    std::vector<std::uint32_t> lost = in;
    std::memset(lost.data() + granule * kSampleGranule / 4, 0, kSampleGranule);
    const auto out = RunKernel(lost, 5, 1);
    ForEachSampledWord(in.size() * 4, [&](std::size_t o) {
      EXPECT_NE(out[o / 4], reference[o / 4]) << "granule " << granule << " offset " << o;
    });
  }
}

}  // namespace
}  // namespace chameleon::train_sim
