// Command line over config file (flags win, also after a reload) and SIGHUP reload semantics
// (an invalid file keeps the running configuration; restart-only keys keep their values).
#include "chameleon/daemon/service_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace chameleon::daemon {
namespace {

class ServiceFlagsTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/chameleon-flags-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/chameleond.yaml";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::string Absent() const { return dir_ + "/absent.yaml"; }

  std::string dir_;
  std::string path_;
};

TEST_F(ServiceFlagsTest, FlagsOverrideTheFileKeyByKey) {
  Write("detection: {stage_m: 4, stage_n: 7}\nmetrics: {listen: \"127.0.0.1:0\"}\n");
  const CommandLine cmd = ParseCommandLine({"--config", path_, "--stage-m", "9"}, Absent());
  ASSERT_LT(cmd.exit_code, 0) << cmd.message;
  EXPECT_EQ(cmd.config_path, path_);
  EXPECT_EQ(cmd.config.daemon.detection.stage_m, 9);                      // flag
  EXPECT_EQ(cmd.config.daemon.detection.stage_n, 7);                      // file
  EXPECT_EQ(cmd.config.daemon.metrics_listen, "127.0.0.1:0");             // file
  EXPECT_EQ(cmd.config.daemon.max_clients, DaemonOptions{}.max_clients);  // default
}

TEST_F(ServiceFlagsTest, EveryFlagReachesItsField) {
  const CommandLine cmd = ParseCommandLine({"--config",
                                            "",
                                            "--socket",
                                            "/tmp/s.sock",
                                            "--socket-mode",
                                            "0600",
                                            "--socket-group",
                                            "gpu",
                                            "--metrics-listen",
                                            "",
                                            "--max-clients",
                                            "7",
                                            "--drain-interval-ms",
                                            "3",
                                            "--heartbeat-timeout-ms",
                                            "900",
                                            "--stage-m",
                                            "1",
                                            "--stage-n",
                                            "2",
                                            "--similarity",
                                            "0.8",
                                            "--length-change",
                                            "0.2",
                                            "--log-level",
                                            "debug",
                                            "--boundary-pattern",
                                            "a*",
                                            "--boundary-pattern",
                                            "b*"},
                                           Absent());
  ASSERT_LT(cmd.exit_code, 0) << cmd.message;
  const ServiceConfig& c = cmd.config;
  EXPECT_EQ(cmd.config_path, "");
  EXPECT_EQ(c.daemon.socket_path, "/tmp/s.sock");
  EXPECT_EQ(c.daemon.socket_mode, 0600u);
  EXPECT_EQ(c.socket_group, "gpu");
  EXPECT_EQ(c.daemon.metrics_listen, "");
  EXPECT_EQ(c.daemon.max_clients, 7u);
  EXPECT_EQ(c.daemon.drain_interval_ms, 3u);
  EXPECT_EQ(c.daemon.heartbeat_timeout_ns, 900'000'000u);
  EXPECT_EQ(c.daemon.detection.stage_m, 1);
  EXPECT_EQ(c.daemon.detection.stage_n, 2);
  EXPECT_DOUBLE_EQ(c.daemon.detection.similarity_threshold, 0.8);
  EXPECT_DOUBLE_EQ(c.daemon.detection.length_change_threshold, 0.2);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.daemon.detection.boundary_patterns, (std::vector<std::string>{"a*", "b*"}));
}

TEST_F(ServiceFlagsTest, PatternFlagReplacesTheFilesList) {
  Write("detection: {boundary_patterns: [\"x*\", \"y*\"]}\n");
  const CommandLine cmd =
      ParseCommandLine({"--config", path_, "--boundary-pattern", "z*"}, Absent());
  ASSERT_LT(cmd.exit_code, 0) << cmd.message;
  EXPECT_EQ(cmd.config.daemon.detection.boundary_patterns, std::vector<std::string>{"z*"});
}

TEST_F(ServiceFlagsTest, BadFlagIsNamedWithItsKeyPath) {
  const CommandLine cmd = ParseCommandLine({"--stage-m", "two"}, Absent());
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_EQ(cmd.message,
            "command line: --stage-m (detection.stage_m): expected an integer in [0, 1000], got "
            "'two'");
}

TEST_F(ServiceFlagsTest, InvalidFileExitsTwoNamingFileAndKey) {
  Write("clients:\n  max: lots\n");
  const CommandLine cmd = ParseCommandLine({"--config", path_}, Absent());
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_EQ(cmd.message, path_ + ": clients.max: expected an integer in [1, 4096], got 'lots'");
}

TEST_F(ServiceFlagsTest, ExplicitMissingConfigIsAnError) {
  const CommandLine cmd = ParseCommandLine({"--config", Absent()}, Absent());
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_NE(cmd.message.find(Absent() + ": cannot read the config file"), std::string::npos);
}

TEST_F(ServiceFlagsTest, DefaultConfigIsOptionalButReadWhenPresent) {
  const CommandLine none = ParseCommandLine({}, Absent());
  ASSERT_LT(none.exit_code, 0) << none.message;
  EXPECT_EQ(none.config_path, "");
  Write("detection: {stage_n: 8}\n");
  const CommandLine present = ParseCommandLine({}, path_);
  ASSERT_LT(present.exit_code, 0) << present.message;
  EXPECT_EQ(present.config_path, path_);
  EXPECT_EQ(present.config.daemon.detection.stage_n, 8);
}

TEST_F(ServiceFlagsTest, HelpExitsZeroAndUnknownFlagExitsTwo) {
  const CommandLine help = ParseCommandLine({"--help"}, Absent());
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.message.find("--config"), std::string::npos);
  const CommandLine unknown = ParseCommandLine({"--frobnicate"}, Absent());
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.message.find("frobnicate"), std::string::npos);
}

TEST_F(ServiceFlagsTest, PrintAndCheckConfigFlagsAreReported) {
  const CommandLine cmd = ParseCommandLine({"--print-config", "--check-config"}, Absent());
  ASSERT_LT(cmd.exit_code, 0) << cmd.message;
  EXPECT_TRUE(cmd.print_config);
  EXPECT_TRUE(cmd.check_config);
}

TEST_F(ServiceFlagsTest, InvalidReloadKeepsTheRunningConfiguration) {
  Write("detection: {stage_m: 3}\n");
  const std::vector<std::string> args = {"--config", path_};
  const CommandLine start = ParseCommandLine(args, Absent());
  ASSERT_LT(start.exit_code, 0) << start.message;
  Write("detection: {stage_m: 3, stage_n: many}\n");
  const ReloadResult reload = ReloadConfig(args, start.config, Absent());
  EXPECT_FALSE(reload.applied);
  EXPECT_EQ(ToYaml(reload.config), ToYaml(start.config));
  ASSERT_EQ(reload.errors.size(), 1u);
  EXPECT_EQ(reload.errors[0],
            path_ + ": detection.stage_n: expected an integer in [0, 1000], got 'many'");
}

TEST_F(ServiceFlagsTest, ReloadAppliesFileChangesWhileFlagsKeepWinning) {
  Write("detection: {stage_m: 2, stage_n: 5}\n");
  const std::vector<std::string> args = {"--config", path_, "--stage-n", "9"};
  const CommandLine start = ParseCommandLine(args, Absent());
  ASSERT_LT(start.exit_code, 0) << start.message;
  Write("detection: {stage_m: 4, stage_n: 3}\nlog: {level: warn}\n");
  const ReloadResult reload = ReloadConfig(args, start.config, Absent());
  ASSERT_TRUE(reload.applied) << testing::PrintToString(reload.errors);
  EXPECT_EQ(reload.config.daemon.detection.stage_m, 4);
  EXPECT_EQ(reload.config.daemon.detection.stage_n, 9);
  EXPECT_EQ(reload.config.log_level, "warn");
  EXPECT_EQ(reload.changed, (std::vector<std::string>{"detection.stage_m", "log.level"}));
  EXPECT_TRUE(reload.needs_restart.empty());
}

TEST_F(ServiceFlagsTest, ReloadKeepsRestartOnlyKeysAndSaysSo) {
  Write("socket: {path: /tmp/a.sock}\nmetrics: {listen: \"127.0.0.1:1\"}\n");
  const std::vector<std::string> args = {"--config", path_};
  const CommandLine start = ParseCommandLine(args, Absent());
  ASSERT_LT(start.exit_code, 0) << start.message;
  Write("socket: {path: /tmp/b.sock}\nmetrics: {listen: \"127.0.0.1:2\"}\nclients: {max: 3}\n");
  const ReloadResult reload = ReloadConfig(args, start.config, Absent());
  ASSERT_TRUE(reload.applied);
  EXPECT_EQ(reload.needs_restart,
            (std::vector<std::string>{"clients.max", "metrics.listen", "socket.path"}));
  EXPECT_EQ(reload.config.daemon.socket_path, "/tmp/a.sock");
  EXPECT_EQ(reload.config.daemon.metrics_listen, "127.0.0.1:1");
  EXPECT_EQ(reload.config.daemon.max_clients, start.config.daemon.max_clients);
}

TEST(ChangedKeysTest, ListsEveryDifferingKeySorted) {
  ServiceConfig a, b;
  EXPECT_TRUE(ChangedKeys(a, b).empty());
  b.daemon.policy.size_weight = 2;
  b.daemon.device_limits = {{0, 1}};
  b.daemon.detection.boundary_patterns = {"x"};
  EXPECT_EQ(ChangedKeys(a, b), (std::vector<std::string>{"detection.boundary_patterns", "devices",
                                                         "policy.size_weight"}));
}

}  // namespace
}  // namespace chameleon::daemon
