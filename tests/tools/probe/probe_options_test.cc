// chameleon-probe's option validation and the statistics its figures use (hand-worked values).
#include "probe_options.h"

#include <gtest/gtest.h>

#include <vector>

#include "figures.h"

namespace chameleon::probe {
namespace {

ParsedProbeOptions Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "chameleon-probe");
  return ParseProbeOptions(static_cast<int>(args.size()), args.data());
}

TEST(ProbeOptionsTest, ShouldReadBytesTrialsDevicesAndYaml) {
  const auto r = Parse({"--bytes", "16MiB", "--trials=3", "--devices", "1,0", "--yaml"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.bytes, 16u << 20);
  EXPECT_EQ(r.options.trials, 3);
  EXPECT_EQ(r.options.devices, (std::vector<int>{1, 0}));
  EXPECT_TRUE(r.options.yaml);
}

TEST(ProbeOptionsTest, ShouldRejectBadValues) {
  const std::vector<std::vector<const char*>> cases = {
      {"--bytes", "0"},      {"--bytes", "17GiB"}, {"--bytes", "1 parsec"},
      {"--trials", "0"},     {"--trials", "ten"},  {"--trials", "100001"},
      {"--devices", "0,,1"}, {"--devices", "-1"},  {"--devices"},
      {"--frobnicate"},      {"--yaml=1"}};
  for (const auto& bad : cases) {
    EXPECT_NE(Parse(bad).error, "") << bad.front();
  }
}

TEST(ProbeOptionsTest, ShouldRejectDevicesTheMachineDoesNotHaveOrRepeats) {
  EXPECT_EQ(CheckDevices({0, 1}, 2), "");
  EXPECT_NE(CheckDevices({2}, 2), "");
  EXPECT_NE(CheckDevices({1, 1}, 2), "");
}

TEST(ProbeFiguresTest, ShouldTakeTheMedianAndTheNearestRankP99) {
  EXPECT_EQ(SpreadOf({3, 1, 2}).median, 2);
  EXPECT_EQ(SpreadOf({4, 1, 3, 2}).median, 2.5);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(SpreadOf(hundred).p99, 99);  // rank ceil(0.99 * 100) = 99
  EXPECT_EQ(SpreadOf({5, 7}).p99, 7);    // rank ceil(1.98) = 2
  EXPECT_EQ(SpreadOf({}).median, 0);
}

}  // namespace
}  // namespace chameleon::probe
