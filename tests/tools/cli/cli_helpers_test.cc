// chameleon::cli's helpers, as the tools' mains use them: GuardedMain turns whatever escapes a
// tool's body into status 1 and one "<tool>: <reason>" line (the tool's user-facing output), and
// AddByteSizeOption parses the one byte-size grammar or rejects the value as a CLI11 error.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "chameleon/cli/byte_size_option.h"
#include "chameleon/cli/guarded_main.h"

namespace {

using chameleon::cli::AddByteSizeOption;
using chameleon::cli::GuardedMain;

TEST(GuardedMainTest, ShouldReturnTheBodysStatusWhenNothingEscapes) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(GuardedMain("tool", [] { return 0; }), 0);
  EXPECT_EQ(GuardedMain("tool", [] { return 3; }), 3);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(GuardedMainTest, ShouldEndWithStatusOneAndTheReasonWhenAStandardExceptionEscapes) {
  testing::internal::CaptureStderr();
  const int status = GuardedMain(
      "chameleon-x", []() -> int { throw std::runtime_error("profile.json: truncated"); });
  EXPECT_EQ(status, 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "chameleon-x: profile.json: truncated\n");
}

TEST(GuardedMainTest, ShouldCatchAnAllocationFailure) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(GuardedMain("t", []() -> int { throw std::bad_alloc(); }), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            std::string("t: ") + std::bad_alloc().what() + "\n");
}

TEST(GuardedMainTest, ShouldCatchWhatIsNotAStandardException) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(GuardedMain("t", []() -> int { throw 42; }), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "t: unknown exception\n");
}

// Parses `args` (after the program name) with one --size option; the status CLI11 gives.
int ParseSize(std::vector<std::string> args, std::uint64_t* size) {
  CLI::App app("test");
  AddByteSizeOption(app, "--size", size, "a byte size");
  std::vector<const char*> argv{"test"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    return 0;
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code();
  }
}

TEST(ByteSizeOptionTest, ShouldParseTheGrammarsForms) {
  std::uint64_t size = 0;
  ASSERT_EQ(ParseSize({"--size", "4096"}, &size), 0);
  EXPECT_EQ(size, 4096u);
  ASSERT_EQ(ParseSize({"--size", "2GiB"}, &size), 0);
  EXPECT_EQ(size, 2ull << 30);
  ASSERT_EQ(ParseSize({"--size", "4T"}, &size), 0);
  EXPECT_EQ(size, 4'000'000'000'000u);
}

TEST(ByteSizeOptionTest, ShouldRejectWhatIsNotAByteSizeAndLeaveTheTargetAlone) {
  std::uint64_t size = 7;
  EXPECT_NE(ParseSize({"--size", "lots"}, &size), 0);
  EXPECT_NE(ParseSize({"--size", "-5"}, &size), 0);
  EXPECT_NE(ParseSize({"--size", ""}, &size), 0);
  EXPECT_EQ(size, 7u);
}

}  // namespace
