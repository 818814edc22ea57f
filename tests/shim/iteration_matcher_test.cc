#include "iteration_matcher.h"

#include <gtest/gtest.h>

#include <vector>

namespace chameleon::shim {
namespace {

std::vector<int> Hits(IterationMatcher& m, const std::vector<std::uint32_t>& stream) {
  std::vector<int> hits;
  for (std::size_t i = 0; i < stream.size(); ++i) {
    if (m.Step(stream[i])) hits.push_back(static_cast<int>(i));
  }
  return hits;
}

TEST(IterationMatcherTest, FindsEachOccurrenceAtItsLastToken) {
  IterationMatcher m;
  const std::vector<std::uint32_t> sig = {16, 17, 18};
  m.SetSignature(sig);
  EXPECT_EQ(Hits(m, {1, 16, 17, 18, 2, 16, 17, 18, 16, 17}), (std::vector<int>{3, 7}));
}

TEST(IterationMatcherTest, OverlappingPrefixesUseTheFailureFunction) {
  IterationMatcher m;
  const std::vector<std::uint32_t> sig = {5, 5, 6};
  m.SetSignature(sig);
  EXPECT_EQ(Hits(m, {5, 5, 5, 6, 5, 5, 6}), (std::vector<int>{3, 6}));
  // Occurrences never overlap (the daemon cuts iterations the same way): 7 8 7 8 7 holds one.
  const std::vector<std::uint32_t> sig2 = {7, 8, 7};
  m.SetSignature(sig2);
  EXPECT_EQ(Hits(m, {7, 8, 7, 8, 7}), (std::vector<int>{2}));
}

TEST(IterationMatcherTest, ARunOfIdenticalOpsLongerThanTheSignatureIsOneOccurrence) {
  // The ResNet replay launches one op as 13 identical chunked launches; its signature is 6 of
  // them. Overlapping matches ended the detailed iteration one op after it began.
  IterationMatcher m;
  const std::vector<std::uint32_t> sig(6, 40);
  m.SetSignature(sig);
  std::vector<std::uint32_t> stream(9, 40);
  stream.push_back(41);
  EXPECT_EQ(Hits(m, stream), (std::vector<int>{5}));
}

TEST(IterationMatcherTest, EmptySignatureNeverMatchesAndLongOnesAreTruncated) {
  IterationMatcher m;
  EXPECT_TRUE(Hits(m, {1, 2, 3}).empty());
  std::vector<std::uint32_t> longsig(IterationMatcher::kMaxSignature + 4);
  for (std::size_t i = 0; i < longsig.size(); ++i) longsig[i] = static_cast<std::uint32_t>(100 + i);
  m.SetSignature(longsig);
  EXPECT_EQ(m.length(), IterationMatcher::kMaxSignature);
  EXPECT_EQ(Hits(m, longsig), (std::vector<int>{static_cast<int>(longsig.size() - 1)}));
}

}  // namespace
}  // namespace chameleon::shim
