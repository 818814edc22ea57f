#include "chameleon/daemon/swap_traffic.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

TEST(SwapTraffic, ShouldGiveTheBytesMovedBetweenTwoMarks) {
  SwapTraffic traffic;
  traffic.OnMark(4, 1000, 200);
  traffic.OnMark(5, 5000, 1200);
  const auto moved = traffic.During(4);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->out_bytes, 4000u);
  EXPECT_EQ(moved->in_bytes, 1000u);
  // 4,000 out and 1,000 in, one after the other over a 1,000 B/s link: 5 s.
  EXPECT_DOUBLE_EQ(SwapTraffic::Seconds(*moved, 1000.0, 1000.0), 5.0);
  // Each direction at its own rate: 4,000 B at 2,000 B/s out, 1,000 B at 500 B/s in: 4 s.
  EXPECT_DOUBLE_EQ(SwapTraffic::Seconds(*moved, 2000.0, 500.0), 4.0);
  EXPECT_DOUBLE_EQ(SwapTraffic::Seconds(*moved, 0.0, 0.0), 0.0);  // no link figure: no correction
  EXPECT_DOUBLE_EQ(SwapTraffic::Seconds(*moved, 0.0, 1000.0), 1.0);  // only the known direction
  EXPECT_FALSE(traffic.During(5).has_value());                       // its end is not marked yet
  EXPECT_FALSE(traffic.During(3).has_value());
}

TEST(SwapTraffic, ShouldDistrustCountersThatGoBackwardsOrForgottenMarks) {
  SwapTraffic traffic;
  traffic.OnMark(1, 500, 500);
  traffic.OnMark(2, 400, 600);  // out went back: a misbehaving client
  EXPECT_FALSE(traffic.During(1).has_value());
  for (std::uint64_t b = 3; b <= 70; ++b) traffic.OnMark(b, b * 10, b);
  EXPECT_TRUE(traffic.During(68).has_value());
  EXPECT_FALSE(traffic.During(6).has_value());  // boundary 6's entry now holds 70
  traffic.OnMark(0, 1, 1);                      // layout-1.0 marks carry no boundary
  EXPECT_FALSE(traffic.During(0).has_value());
}

}  // namespace
}  // namespace chameleon::daemon
