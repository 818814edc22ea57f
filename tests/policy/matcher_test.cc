#include <gtest/gtest.h>

#include <string>

#include "chameleon/policy/fnv1a.h"
#include "chameleon/policy/matcher.h"
#include "chameleon/policy/synthetic.h"

namespace chameleon::policy {
namespace {

Profile Iteration(std::uint64_t seed) {
  SyntheticSpec spec;
  spec.layers = 12;
  spec.ops = 6000;
  spec.tensors = 3000;
  spec.seed = seed;
  return MakeTransformerProfile(spec);
}

double CorrectFraction(const std::vector<std::int32_t>& match, std::size_t originals) {
  std::size_t correct = 0;
  for (std::size_t t = 0; t < originals; ++t) correct += match[t] == static_cast<std::int32_t>(t);
  return static_cast<double>(correct) / originals;
}

TEST(PolicyMatcher, ShouldMatchEveryTensorOfAnUnperturbedIteration) {
  const Profile a = Iteration(7);
  const Profile b = Iteration(7);  // the next iteration: same ops, tensors at new addresses
  const Matcher matcher(ComputeFeatures(a));
  const double fraction = CorrectFraction(matcher.Match(ComputeFeatures(b)), a.tensors.size());
  EXPECT_GE(fraction, 0.99);
}

TEST(PolicyMatcher, ShouldMatchNinetyFivePercentWithTwoPercentOfOpsInserted) {
  const Profile a = Iteration(9);
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const Profile b = InsertOps(a, 0.02, seed);
    ASSERT_GT(b.ops.size(), a.ops.size());
    const Matcher matcher(ComputeFeatures(a));
    const std::vector<std::int32_t> match = matcher.Match(ComputeFeatures(b));
    EXPECT_GE(CorrectFraction(match, a.tensors.size()), 0.95) << "seed " << seed;
    // Scratch tensors of the inserted ops have no counterpart.
    for (std::size_t t = a.tensors.size(); t < b.tensors.size(); ++t) EXPECT_EQ(match[t], -1);
  }
}

TEST(PolicyMatcher, ShouldNotMatchTensorsOfAnotherSize) {
  TensorFeatures a;
  a.bytes = 10;
  a.match_key = 1;
  TensorFeatures b = a;
  b.bytes = 11;
  EXPECT_EQ(Similarity(a, b), 0.0);
  EXPECT_DOUBLE_EQ(Similarity(a, a), 1.0);
  const Matcher matcher({a});
  EXPECT_EQ(matcher.Match({b}), (std::vector<std::int32_t>{-1}));
  EXPECT_EQ(matcher.Match({a}), (std::vector<std::int32_t>{0}));
  b.match_key = 2;  // a different key does not block a size match by similarity
  b.bytes = 10;
  EXPECT_EQ(matcher.Match({b}), (std::vector<std::int32_t>{0}));
}

// Marks the ops of `b` that are not in `a` (b = a with ops inserted).
std::vector<bool> InsertedOps(const Profile& a, const Profile& b) {
  std::vector<bool> inserted(b.ops.size(), true);
  std::size_t i = 0;
  for (std::size_t j = 0; j < b.ops.size() && i < a.ops.size(); ++j) {
    const ProfileOp& x = a.ops[i];
    const ProfileOp& y = b.ops[j];
    if (x.token == y.token && x.reads == y.reads && x.writes == y.writes) {
      inserted[j] = false;
      ++i;
    }
  }
  return inserted;
}

TEST(PolicyMatcher, ShouldKeepKeysStableWhenOpsWithNewTokensAreInserted) {
  const Profile a = Iteration(3);
  Profile b = InsertOps(a, 0.02, 5);
  const std::vector<bool> inserted = InsertedOps(a, b);
  for (std::size_t j = 0; j < b.ops.size(); ++j) {
    if (inserted[j]) b.ops[j].token = 999;  // a kernel this iteration never ran before
  }
  const auto fa = ComputeFeatures(a);
  const auto fb = ComputeFeatures(b);
  std::size_t equal = 0;
  for (std::size_t t = 0; t < fa.size(); ++t) equal += fa[t].match_key == fb[t].match_key;
  EXPECT_EQ(equal, fa.size());
}

// The published FNV-1a 64 test vectors: "" and "a", "foobar" fed one byte at a time, and a word
// fed whole equals its bytes fed one by one, least significant first.
TEST(Fnv1a, MatchesThePublishedVectorsAndHashesAWordAsItsBytes) {
  static_assert(kFnv1aOffset == 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a(kFnv1aOffset, 'a', 1), 0xaf63dc4c8601ec8cull);
  std::uint64_t h = kFnv1aOffset;
  for (char c : std::string("foobar")) h = Fnv1a(h, static_cast<unsigned char>(c), 1);
  EXPECT_EQ(h, 0x85944171f73967e8ull);
  const std::uint64_t word = 0x0102030405060708ull;
  std::uint64_t bytewise = kFnv1aOffset;
  for (int i = 0; i < 8; ++i) bytewise = Fnv1a(bytewise, (word >> (8 * i)) & 0xff, 1);
  EXPECT_EQ(Fnv1a(kFnv1aOffset, word), bytewise);
}

}  // namespace
}  // namespace chameleon::policy
