#include "chameleon/daemon/iteration_clock.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

/// A layout-1.1 mark at boundary `b` under `generation`, reporting `device_ns` for `timed`.
ipc::IterationMarkRecord Mark(std::uint64_t b, std::uint64_t generation, std::uint64_t timed,
                              std::uint64_t device_ns, std::uint64_t host_ns = 0) {
  return {b, host_ns, device_ns, 100, timed, generation, 0};
}

TEST(IterationClock, HostTimeServesOnlyUntilTheFirstDeviceTime) {
  IterationClock clock;
  clock.OnMark(Mark(1, 0, 0, 0, 1'000'000'000));
  EXPECT_EQ(clock.iteration_s(), 0);  // one host time is no interval yet
  clock.OnMark(Mark(2, 0, 0, 0, 1'500'000'000));
  EXPECT_DOUBLE_EQ(clock.iteration_s(), 0.5);
  EXPECT_FALSE(clock.device_time_seen());
  clock.OnMark(Mark(3, 0, 2, 250'000'000, 2'000'000'000));
  EXPECT_DOUBLE_EQ(clock.iteration_s(), 0.25);
  EXPECT_TRUE(clock.device_time_seen());
  // Host time never comes back: a mark without device time keeps the last device time.
  clock.OnMark(Mark(4, 0, 0, 0, 4'000'000'000));
  EXPECT_DOUBLE_EQ(clock.iteration_s(), 0.25);
  EXPECT_EQ(clock.marks(), 4u);
  EXPECT_EQ(clock.last_boundary(), 4u);
  EXPECT_FALSE(clock.carries_generation());  // layout-1.0 marks: no generation
}

TEST(IterationClock, AnIntervalBelongsToAGenerationOnlyWhenInForceAtBothEnds) {
  IterationClock clock;
  clock.OnMark(Mark(1, 3, 0, 0));
  clock.OnMark(Mark(2, 3, 0, 0));
  clock.OnMark(Mark(3, 4, 0, 0));  // generation 4 installed at boundary 3
  clock.OnMark(Mark(4, 4, 0, 0));
  EXPECT_TRUE(clock.carries_generation());
  EXPECT_EQ(clock.GenerationOver(1), std::optional<std::uint64_t>(3));
  EXPECT_EQ(clock.GenerationOver(2), std::nullopt);  // began under 3, ended under 4
  EXPECT_EQ(clock.GenerationOver(3), std::optional<std::uint64_t>(4));
  EXPECT_EQ(clock.GenerationOver(4), std::nullopt);  // its end was not marked yet
}

// kFlagGenerationInstalled: the executor installed the mark's generation at that boundary and
// switches only at boundaries, so the interval it starts is that generation's whole, even when the
// next boundary installs another one (the next candidate, published ahead).
TEST(IterationClock, AnIntervalBelongsToTheGenerationInstalledAtItsStart) {
  IterationClock clock;
  clock.OnMark(Mark(1, 3, 0, 0), ipc::kFlagGenerationInstalled);
  EXPECT_TRUE(clock.last_installed());
  EXPECT_TRUE(clock.marks_installed());
  EXPECT_EQ(clock.GenerationOver(1), std::optional<std::uint64_t>(3));  // before mark 2 came
  clock.OnMark(Mark(2, 4, 0, 0), ipc::kFlagGenerationInstalled);
  clock.OnMark(Mark(3, 5, 0, 0), ipc::kFlagGenerationInstalled);
  EXPECT_EQ(clock.GenerationOver(1), std::optional<std::uint64_t>(3));
  EXPECT_EQ(clock.GenerationOver(2), std::optional<std::uint64_t>(4));
  EXPECT_EQ(clock.last_generation(), 5u);
  // A mark without the flag (the executor had no policy yet): the both-ends rule again.
  clock.OnMark(Mark(4, 5, 0, 0));
  EXPECT_FALSE(clock.last_installed());
  EXPECT_TRUE(clock.marks_installed());  // sticky: this shim marks installs
  EXPECT_EQ(clock.GenerationOver(4), std::nullopt);
  clock.OnMark(Mark(5, 5, 0, 0));
  EXPECT_EQ(clock.GenerationOver(4), std::optional<std::uint64_t>(5));
}

TEST(IterationClock, ForgetsBoundariesSixtyFourMarksBack) {
  IterationClock clock;
  for (std::uint64_t b = 1; b <= 70; ++b) clock.OnMark(Mark(b, 9, 0, 0));
  EXPECT_EQ(clock.GenerationOver(68), std::optional<std::uint64_t>(9));
  EXPECT_EQ(clock.GenerationOver(7), std::optional<std::uint64_t>(9));
  EXPECT_EQ(clock.GenerationOver(6), std::nullopt);  // boundary 6's entry now holds 70
}

}  // namespace
}  // namespace chameleon::daemon
