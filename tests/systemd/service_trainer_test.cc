// SIGTERM leaves a real training job running with identical results: chameleond (the service
// binary) serves chameleon-train-sim under the shim on simgpu; once the client is STABLE the job
// is paused (SIGSTOP, so "mid-run" is certain however fast the machine is), the daemon gets
// SIGTERM and exits, the job continues and finishes with the same losses, peak and checksum as a
// run without Chameleon.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "process_util.h"

namespace chameleon::service_test {
namespace {

// ~10 ms a step on simgpu: STABLE (m = n = 1) comes within the first few dozen, so the job is
// well inside its run when it is paused.
const std::vector<std::string> kTrain = {"--layers", "2", "--hidden", "64",  "--seq",  "32",
                                         "--batch",  "4", "--steps",  "300", "--seed", "3"};

/// The trainer's result lines (losses, shifts, peak, checksum) without the simulated step time,
/// which the shim's own one-time driver calls may shift; shim log lines are left out.
std::vector<std::string> Results(const std::string& output) {
  static const std::regex kResult(
      R"(^(step \d+ loss \S+|shift at step \d+|peak \d+|checksum \S+))");
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kResult)) lines.push_back(m[1]);
  }
  return lines;
}

/// chameleon_client_stage of slot 0, or -1.
int Stage(int port) {
  const auto body = HttpGet(port, "/metrics", Millis(2000));
  if (!body) return -1;
  std::smatch m;
  static const std::regex kStage(R"(\nchameleon_client_stage\{client="0"\} (-?[0-9]+))");
  return std::regex_search(*body, m, kStage) ? std::stoi(m[1]) : -1;
}

TEST(ServiceTrainerTest, SigtermAfterStableLeavesTheTrainerRunningWithIdenticalResults) {
  TempDir dir("chameleon-svc-train");
  std::vector<std::string> train{CHAMELEON_TRAINER};
  train.insert(train.end(), kTrain.begin(), kTrain.end());
  const Output plain =
      RunCommand(train, Millis(120000), "", {"LD_LIBRARY_PATH=" CHAMELEON_SIMGPU_DIR});
  ASSERT_EQ(plain.exit_code, 0) << plain.text;
  const std::vector<std::string> expected = Results(plain.text);
  ASSERT_EQ(expected.size(), 300u + 2u) << plain.text;  // 300 steps, peak, checksum

  std::string error;
  auto daemon = StartChameleond(CHAMELEOND_PATH, dir.path(),
                                {"--config", "", "--stage-m", "1", "--stage-n", "1"}, &error);
  ASSERT_TRUE(daemon.has_value()) << error;
  auto job = Child::Spawn(train,
                          {"LD_LIBRARY_PATH=" CHAMELEON_SIMGPU_DIR, "LD_PRELOAD=" CHAMELEON_SHIM,
                           "CHAMELEON_SOCKET=" + daemon->socket_path},
                          &error);
  ASSERT_NE(job, nullptr) << error;
  const bool stable = WaitFor(
      [&] { return Stage(daemon->metrics_port) == 2 || job->WaitExit(Millis(0)).has_value(); },
      Millis(60000), kPollInterval);
  ASSERT_TRUE(stable && job->running())
      << "the job ended or timed out before the daemon saw it STABLE\n"
      << job->output() << "\n--- daemon\n"
      << daemon->child->output();
  ASSERT_TRUE(job->Signal(SIGSTOP));

  ASSERT_TRUE(daemon->child->Signal(SIGTERM));
  const auto daemon_exit = daemon->child->WaitExit(Millis(10000));
  ASSERT_TRUE(daemon_exit.has_value()) << daemon->child->output();
  EXPECT_EQ(*daemon_exit, 0) << daemon->child->output();

  ASSERT_TRUE(job->Signal(SIGCONT));
  const auto job_exit = job->WaitExit(Millis(120000));
  ASSERT_TRUE(job_exit.has_value()) << job->output();
  EXPECT_EQ(*job_exit, 0) << job->output();
  EXPECT_EQ(Results(job->output()), expected) << job->output();
}

}  // namespace
}  // namespace chameleon::service_test
