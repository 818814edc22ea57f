// chameleon-run's command line (pure parsing): the byte-size grammar for --limit, "--" handling,
// and the errors that make it exit 2 before anything starts.
#include "run_options.h"

#include <gtest/gtest.h>

#include <vector>

#include "install_paths.h"

namespace chameleon::run {
namespace {

ParsedRunOptions Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "chameleon-run");
  return ParseRunOptions(static_cast<int>(args.size()), args.data());
}

TEST(RunOptionsTest, ShouldTakeTheLimitByTheByteSizeGrammarAndTheCommandAfterDashes) {
  const auto r = Parse({"--limit", "1.5GiB", "--socket=/tmp/s.sock", "--", "python3", "-c", "x"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.limit, 1610612736u);  // 1.5 * 2^30
  EXPECT_EQ(r.options.socket, "/tmp/s.sock");
  EXPECT_EQ(r.options.command, (std::vector<std::string>{"python3", "-c", "x"}));
}

TEST(RunOptionsTest, ShouldPassOptionsAfterDashesToTheCommand) {
  const auto r = Parse({"--", "train", "--limit", "3"});
  ASSERT_EQ(r.error, "");
  EXPECT_FALSE(r.options.limit.has_value());
  EXPECT_EQ(r.options.command, (std::vector<std::string>{"train", "--limit", "3"}));
}

TEST(RunOptionsTest, ShouldStartTheCommandAtTheFirstNonOptionWithoutDashes) {
  const auto r = Parse({"--limit=512MB", "train", "--steps", "2"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.limit, 512000000u);
  EXPECT_EQ(r.options.command.front(), "train");
}

TEST(RunOptionsTest, ShouldRejectABadZeroOrMissingLimitAndAMissingCommand) {
  EXPECT_NE(Parse({"--limit", "12parsecs", "--", "true"}).error, "");
  EXPECT_NE(Parse({"--limit", "0", "--", "true"}).error, "");
  EXPECT_NE(Parse({"--limit", "-1GiB", "--", "true"}).error, "");
  EXPECT_NE(Parse({"--limit"}).error, "");
  EXPECT_NE(Parse({"--limit", "1GiB", "--"}).error, "");
  EXPECT_NE(Parse({"--frobnicate", "--", "true"}).error, "");
  EXPECT_NE(Parse({"--socket=", "--", "true"}).error, "");
}

TEST(RunOptionsTest, ShouldAppendToAnExistingPreloadOnce) {
  EXPECT_EQ(AppendPreload("", "/l/libchameleon.so"), "/l/libchameleon.so");
  EXPECT_EQ(AppendPreload("libm.so.6", "/l/libchameleon.so"), "libm.so.6:/l/libchameleon.so");
  EXPECT_EQ(AppendPreload("/l/libchameleon.so libm.so.6", "/l/libchameleon.so"),
            "/l/libchameleon.so libm.so.6");
}

}  // namespace
}  // namespace chameleon::run
