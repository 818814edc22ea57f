// The project's own workloads under the shim: chameleon-train-sim (three allocation styles) and
// chameleon-replay (a real PyTorch trace) print byte-identical output with and without the shim;
// with a daemon attached, every loss/peak/checksum line is identical and the daemon gets records.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "child_process.h"
#include "fake_daemon.h"
#include "test_env.h"

namespace shim_test {
namespace {

std::vector<std::string> RunWorkload(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  EXPECT_EQ(RunToCompletion(argv, env, &out, 60000), 0) << argv[0];
  return out;
}

// The trainer's step lines carry a simulated time. With a daemon attached the shim names each
// kernel and reads its parameter layout once, on its first launch (step 0); those driver calls
// advance simgpu's virtual host clock as they would cost real time on a GPU. So step 0's time is
// the one field allowed to differ; everything else must be byte-identical.
std::vector<std::string> Results(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (std::string l : lines) {
    const auto t = l.find(" time ");
    if (l.rfind("step 0 ", 0) == 0 && t != std::string::npos) l.erase(t);
    out.push_back(l);
  }
  return out;
}

class ShimWorkloadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShimWorkloadTest, TrainerOutputIsByteIdenticalWithoutDaemon) {
  const std::vector<std::string> argv = {CHAMELEON_TRAIN_SIM, "--steps", "4", "--layers", "2",
                                         "--alloc",           GetParam()};
  const auto plain = RunWorkload(argv, PlainEnv());
  const auto shim = RunWorkload(argv, ShimEnv("/nonexistent/chameleon.sock"));
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain, shim);
}

TEST_P(ShimWorkloadTest, TrainerResultsAreIdenticalWithDaemonAttached) {
  chameleon::shim::testing::FakeDaemon daemon;
  const std::string socket = SocketPath(std::string("train_") + GetParam());
  ASSERT_TRUE(daemon.Start(socket));
  const std::vector<std::string> argv = {CHAMELEON_TRAIN_SIM, "--steps", "4", "--layers", "2",
                                         "--alloc",           GetParam()};
  const auto plain = RunWorkload(argv, PlainEnv());
  const auto shim = RunWorkload(argv, ShimEnv(socket));
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(Results(plain), Results(shim));
  ASSERT_EQ(daemon.client_count(), 1u);
  auto* client = daemon.client(0);
  std::size_t launches = 0;
  for (const auto& r : client->Drain()) {
    if (r.type == chameleon::ipc::RecordType::kLaunch) ++launches;
  }
  EXPECT_GT(launches, 100u);
  EXPECT_EQ(client->segment.header()->records_dropped.load(), 0u);
  EXPECT_EQ(client->segment.header()->client_exited.load(), 1u);
}

INSTANTIATE_TEST_SUITE_P(AllocationStyles, ShimWorkloadTest,
                         ::testing::Values("tensor", "caching", "expandable"));

TEST(ShimReplayTest, ReplayedTraceIsByteIdenticalWithoutDaemon) {
  const std::vector<std::string> argv = {CHAMELEON_REPLAY, "--iterations", "2",
                                         CHAMELEON_TRACES_DIR "/resnet_1gpu_et.json.gz"};
  const auto plain = RunWorkload(argv, PlainEnv());
  const auto shim = RunWorkload(argv, ShimEnv("/nonexistent/chameleon.sock"));
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain, shim);
}

}  // namespace
}  // namespace shim_test
