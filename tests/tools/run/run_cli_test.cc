// chameleon-run as a user runs it: the command's exit status comes back (128 + N after signal
// N), a private chameleond serves the command and is gone after it, a node daemon is used when
// one answers, --limit reaches the shim, and a bad --limit stops before anything runs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "chameleon/control/control_client.h"
#include "support/child_process.h"
#include "support/required_file.h"
#include "support/wait_for.h"

namespace {

using chameleon::test_support::EnvChanges;
using chameleon::test_support::ReadWholeFile;
using chameleon::test_support::RunChild;

class RunCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(chameleon::test_support::RequiredFile(RUN_BINARY, "chameleon-run"));
    std::string templ = ::testing::TempDir() + "/run_cli.XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }

  // No node daemon: a socket path nothing listens on, so chameleon-run starts a private one.
  EnvChanges Hermetic() const {
    return {{"CHAMELEON_SOCKET", dir_ + "/no-node-daemon.sock"}, {"LD_PRELOAD", std::nullopt}};
  }

  chameleon::test_support::ChildResult Run(std::vector<std::string> args, EnvChanges env = {}) {
    args.insert(args.begin(), RUN_BINARY);
    EnvChanges all = Hermetic();
    all.insert(all.end(), env.begin(), env.end());
    return RunChild(args, all, dir_);
  }

  std::string dir_;
};

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST_F(RunCliTest, ShouldExitWithTheCommandsStatus) {
  EXPECT_EQ(Run({"--", "/bin/sh", "-c", "exit 7"}).status, 7);
  EXPECT_EQ(Run({"--", "/bin/sh", "-c", "exit 0"}).status, 0);
  EXPECT_EQ(Run({"--", dir_ + "/no-such-command"}).status, 127);
}

TEST_F(RunCliTest, ShouldExitWith128PlusTheSignalThatEndedTheCommand) {
  EXPECT_EQ(Run({"--", "/bin/sh", "-c", "kill -TERM $$"}).status, 128 + SIGTERM);
}

TEST_F(RunCliTest, ShouldForwardSigtermToTheCommandAndStopThePrivateDaemon) {
  const std::string ready = dir_ + "/ready";
  const std::string status = dir_ + "/status.json";
  const std::string script = "\"" CTL_BINARY "\" --socket \"$CHAMELEON_SOCKET\" status --json > " +
                             status + " && touch " + ready + " && exec sleep 60";
  const pid_t pid = chameleon::test_support::StartChild({RUN_BINARY, "--", "/bin/sh", "-c", script},
                                                        Hermetic(), dir_ + "/out", dir_ + "/err");
  ASSERT_TRUE(
      chameleon::test_support::WaitFor([&] { return Exists(ready); }, std::chrono::seconds(20)));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(chameleon::test_support::WaitChild(pid), 128 + SIGTERM);
  const auto daemon = nlohmann::json::parse(ReadWholeFile(status))["daemon"];
  const pid_t daemon_pid = daemon["pid"].get<pid_t>();
  EXPECT_EQ(::kill(daemon_pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(Exists(daemon["socket"].get<std::string>()));
}

TEST_F(RunCliTest, ShouldStartAPrivateDaemonForTheCommandAndStopItAfter) {
  const std::string status = dir_ + "/status.json";
  const auto r =
      Run({"--", "/bin/sh", "-c",
           "\"" CTL_BINARY "\" --socket \"$CHAMELEON_SOCKET\" status --json > " + status});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto daemon = nlohmann::json::parse(ReadWholeFile(status))["daemon"];
  const std::string socket = daemon["socket"].get<std::string>();
  EXPECT_NE(socket, dir_ + "/no-node-daemon.sock");
  EXPECT_GT(daemon["metrics_port"].get<int>(), 0);  // an ephemeral port was bound
  EXPECT_FALSE(Exists(socket));
  EXPECT_FALSE(Exists(socket.substr(0, socket.rfind('/'))));  // its temporary folder too
  EXPECT_EQ(::kill(daemon["pid"].get<pid_t>(), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(RunCliTest, ShouldUseTheNodeDaemonWhenOneAnswersAndLeaveItRunning) {
  const std::string socket = dir_ + "/node.sock";
  const pid_t daemon = chameleon::test_support::StartChild(
      {DAEMON_BINARY, "--config", "", "--socket", socket, "--metrics-listen", "127.0.0.1:0"}, {},
      dir_ + "/daemon.out", dir_ + "/daemon.err");
  ASSERT_TRUE(chameleon::test_support::WaitFor([&] {
    return chameleon::control::ControlRequest(socket, {{"command", "status"}}, 500)
        .value("ok", false);
  }));
  const std::string seen = dir_ + "/seen";
  const auto r = Run({"--", "/bin/sh", "-c", "printf %s \"$CHAMELEON_SOCKET\" > " + seen},
                     {{"CHAMELEON_SOCKET", socket}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(seen), socket);
  EXPECT_EQ(::kill(daemon, 0), 0);  // still serving the node
  ::kill(daemon, SIGTERM);
  EXPECT_EQ(chameleon::test_support::WaitChild(daemon), 0);
}

TEST_F(RunCliTest, ShouldAppendTheShimToAnExistingPreload) {
  const std::string seen = dir_ + "/preload";
  const auto r = Run({"--", "/bin/sh", "-c", "printf %s \"$LD_PRELOAD\" > " + seen},
                     {{"LD_PRELOAD", "libm.so.6"}});
  EXPECT_EQ(r.status, 0) << r.err;
  char shim[PATH_MAX];
  ASSERT_NE(::realpath(SHIM_LIBRARY, shim), nullptr);
  EXPECT_EQ(ReadWholeFile(seen), std::string("libm.so.6:") + shim);
}

TEST_F(RunCliTest, ShouldHandTheLimitToTheShim) {
  const std::string stats = dir_ + "/stats.jsonl";
  const auto r = Run({"--limit", "48MiB", "--", TRAIN_SIM_BINARY, "--layers", "1", "--hidden", "32",
                      "--seq", "32", "--batch", "2", "--steps", "2"},
                     {{"LD_LIBRARY_PATH", SIMGPU_DIR}, {"CHAMELEON_STATS_FILE", stats}});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string text = ReadWholeFile(stats);
  ASSERT_FALSE(text.empty());
  const std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  EXPECT_EQ(nlohmann::json::parse(last)["limit"].get<std::uint64_t>(), 48u << 20);
}

TEST_F(RunCliTest, ShouldExitTwoOnABadLimitWithoutRunningTheCommand) {
  const std::string marker = dir_ + "/ran";
  const auto r = Run({"--limit", "12parsecs", "--", "/bin/sh", "-c", "touch " + marker});
  EXPECT_EQ(r.status, 2);
  EXPECT_FALSE(Exists(marker));
  EXPECT_NE(r.err.find("12parsecs"), std::string::npos);  // the message names the bad value
}

}  // namespace
