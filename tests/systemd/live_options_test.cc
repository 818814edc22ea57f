// Daemon::UpdateOptions on a running daemon with connected fake clients: a lowered stage n moves
// a client already past it to STABLE, the configured policy settings and per-device limits
// shape the next candidate, new boundary patterns reach a client still looking for its loop, and
// restart-only settings keep their running values.
#include <gtest/gtest.h>

#include "chameleon/ipc/policy_mailbox.h"
#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

class LiveOptionsTest : public DaemonTest {
 protected:
  /// Applies `next` and waits until the loop has taken it.
  void Update(const DaemonOptions& next) {
    const std::uint64_t before = daemon_->options_updates();
    ASSERT_TRUE(daemon_->UpdateOptions(next));
    ASSERT_TRUE(WaitFor([&] { return daemon_->options_updates() > before; }));
    options_ = next;
  }
  std::string Stage(FakeClient& client) {
    client.Heartbeat();
    return Describe(client.id())["stage"].get<std::string>();
  }
};

// The client is past the lowered n and nothing holds it in GEN_POLICY (no candidate to measure:
// this fake client never records a detailed iteration), so the daemon's next housekeeping pass
// releases it: STABLE without waiting for another step.
TEST_F(LiveOptionsTest, LoweredStageNMovesAClientPastItToStable) {
  options_.detection.stage_n = 100;
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  PushSteps(*client, spec, 0, 12);
  ASSERT_TRUE(WaitDrained(*client));
  ASSERT_TRUE(WaitFor([&] { return Stage(*client) == "GEN_POLICY"; })) << Describe(client->id());
  const std::uint64_t iterations = Describe(client->id())["iterations"].get<std::uint64_t>();

  DaemonOptions next = options_;
  next.detection.stage_n = 1;
  Update(next);
  EXPECT_EQ(Control({{"command", "status"}})["daemon"]["stage_n"].get<int>(), 1);
  ASSERT_TRUE(WaitFor([&] { return Stage(*client) == "STABLE"; })) << Describe(client->id());
  EXPECT_EQ(Describe(client->id())["iterations"].get<std::uint64_t>(), iterations)
      << "no step was pushed after the update";
}

TEST_F(LiveOptionsTest, RaisedStageNKeepsAClientInGenPolicyThatWouldHaveBeenStable) {
  StartDaemon();  // n = 5
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  PushSteps(*client, spec, 0, 6);
  ASSERT_TRUE(WaitDrained(*client));
  ASSERT_TRUE(WaitFor([&] { return Stage(*client) == "GEN_POLICY"; })) << Describe(client->id());
  DaemonOptions next = options_;
  next.detection.stage_n = 1000;
  Update(next);
  PushSteps(*client, spec, 6, 20);  // n = 5 would have been STABLE after 6 of these
  ASSERT_TRUE(WaitDrained(*client));
  EXPECT_EQ(Stage(*client), "GEN_POLICY") << Describe(client->id());
}

TEST_F(LiveOptionsTest, ConfiguredDeviceLimitAppliesAndTheSmallerOfBothLimitsWins) {
  options_.device_limits = {{0, 20 * kMiB}, {1, 5 * kMiB}};
  StartDaemon();
  auto client = Connect(1ull << 30);  // device 0 with 1 GiB
  ASSERT_NE(client, nullptr);
  auto limit = [&] { return Describe(client->id())["device"]["limit_bytes"].get<std::uint64_t>(); };
  EXPECT_EQ(limit(), 20 * kMiB);  // the operator's limit for device 0, not device 1's
  client->header()->device_limit_bytes.store(16 * kMiB);  // CHAMELEON_DEVICE_LIMIT below it
  EXPECT_EQ(limit(), 16 * kMiB);
  client->header()->device_limit_bytes.store(64 * kMiB);  // above it: the operator's wins
  EXPECT_EQ(limit(), 20 * kMiB);
  DaemonOptions next = options_;
  next.device_limits = {{0, 12 * kMiB}};
  Update(next);
  EXPECT_EQ(limit(), 12 * kMiB);
  next.device_limits = {{0, 4ull << 30}};  // above the device's memory: capped at it
  Update(next);
  EXPECT_EQ(limit(), 64 * kMiB);
  client->header()->device_limit_bytes.store(0);
  EXPECT_EQ(limit(), 1ull << 30);
  next.device_limits.clear();
  Update(next);
  EXPECT_EQ(limit(), 1ull << 30);  // neither: the device's memory from HELLO
}

// A client that sees two GPUs and whose executor serves the second (a torchrun rank seeing every
// GPU): the operator's limit for that device is its own, not the first HELLO device's.
TEST_F(LiveOptionsTest, TheLimitIsThatOfTheDeviceTheExecutorServes) {
  options_.device_limits = {{0, 20 * kMiB}, {1, 5 * kMiB}};
  StartDaemon();
  std::string error;
  auto client = FakeClient::ConnectWithDevices(options_.socket_path, &error,
                                               {FakeClient::Device(0, "0000:01:00.0", 1ull << 30),
                                                FakeClient::Device(1, "0000:02:00.0", 1ull << 30)},
                                               SmallGeometry());
  ASSERT_NE(client, nullptr) << error;
  auto limit = [&] { return Describe(client->id())["device"]["limit_bytes"].get<std::uint64_t>(); };
  EXPECT_EQ(limit(), 20 * kMiB) << "the first device's until the executor is decided";
  client->header()->executor_device.store(2);  // device 1, plus one
  EXPECT_EQ(limit(), 5 * kMiB);
  client->header()->executor_device.store(9);  // an ordinal HELLO did not name: the first again
  EXPECT_EQ(limit(), 20 * kMiB);
}

TEST_F(LiveOptionsTest, RestartOnlySettingsKeepTheirRunningValues) {
  StartDaemon();
  DaemonOptions next = options_;
  next.socket_path = dir_ + "/other.sock";
  next.max_clients = 1;
  next.detection.stage_m = 7;
  ASSERT_TRUE(daemon_->UpdateOptions(next));
  ASSERT_TRUE(WaitFor([&] { return daemon_->options_updates() == 1; }));
  const auto status = Control({{"command", "status"}});  // still on the old socket
  ASSERT_TRUE(status["ok"].get<bool>()) << status;
  EXPECT_EQ(status["daemon"]["socket"], dir_ + "/d.sock");
  EXPECT_EQ(status["daemon"]["max_clients"].get<std::uint32_t>(), 256u);
  EXPECT_EQ(status["daemon"]["stage_m"].get<int>(), 7);
}

TEST_F(LiveOptionsTest, NewBoundaryPatternReachesAClientStillLookingForItsLoop) {
  options_.detection.min_periods = 64;  // automatic detection cannot succeed on 12 steps
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  client->Name(40, "void loss_fwd_kernel<float>(float*)");
  LoopSpec spec;
  PushSteps(*client, spec, 0, 4);
  ASSERT_TRUE(WaitDrained(*client));
  ASSERT_EQ(Describe(client->id())["boundary"]["source"], "none");
  DaemonOptions next = options_;
  next.detection.boundary_patterns = {"*loss_fwd*"};
  Update(next);
  EXPECT_EQ(Describe(client->id())["boundary"]["source"], "pattern");
  PushSteps(*client, spec, 4, 16);
  ASSERT_TRUE(WaitDrained(*client));
  ASSERT_TRUE(WaitFor([&] { return Stage(*client) == "STABLE"; })) << Describe(client->id());
  EXPECT_EQ(Describe(client->id())["iteration_ops"].get<std::size_t>(), StepOps(spec, 0).size());
}

TEST_F(LiveOptionsTest, PolicySettingsAndDeviceLimitShapeTheNextCandidate) {
  options_.detection.stage_n = 50;  // GEN_POLICY long enough for several candidates
  options_.device_limits = {{0, 64 * kMiB}};
  StartDaemon();
  // The client's GPU has 1 GiB: without the configured limit nothing would need to swap.
  auto client = Connect(1ull << 30);
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  ASSERT_TRUE(client->Alloc(1, kMiB));
  PushSteps(*client, spec, 0, 6);
  ASSERT_TRUE(WaitFor([&] { return client->DetailedRequested(); }));
  ASSERT_TRUE(client->Mark(6, 100'000'000, 0));
  PushDetailedStep(*client, spec, 6, 2 * kMiB);  // peaks at 1 + 53 * 2 MiB
  ASSERT_TRUE(client->Mark(7, 100'000'000, StepOps(spec, 6).size()));
  client->header()->detail_done_seq.store(client->header()->detail_request_seq.load());
  int step = 7;
  // Pushes GEN_POLICY steps until the daemon has answered with one more candidate or an error
  // (`candidate_only`: a new candidate; the previous outcome's error is still shown until then).
  auto next_outcome = [&](std::size_t candidates_before, bool candidate_only = false) {
    for (int tries = 0; tries < 5; ++tries, ++step) {
      PushSteps(*client, spec, step, step + 1);
      EXPECT_TRUE(client->Mark(std::uint64_t(step) + 1, 100'000'000, 0));
      if (!WaitDrained(*client)) return nlohmann::json();
      const bool done = WaitFor(
          [&] {
            const auto p = Describe(client->id())["policy"];
            return p["candidates"].size() > candidates_before ||
                   (!candidate_only && !p["error"].get<std::string>().empty());
          },
          2000);
      if (done) {
        ++step;
        return Describe(client->id())["policy"];
      }
    }
    return nlohmann::json();
  };
  auto first = next_outcome(0);
  ASSERT_TRUE(first.is_object()) << Describe(client->id()).dump(2);
  ASSERT_EQ(first["candidates"].size(), 1u) << first.dump(2);
  EXPECT_GT(first["candidates"][0]["swaps"].get<int>(), 0) << first.dump(2);
  EXPECT_LE(first["candidates"][0]["predicted_peak_bytes"].get<std::uint64_t>(), 64 * kMiB);

  // No tensor is large enough to be worth a transfer any more: the next candidate cannot fit.
  DaemonOptions next = options_;
  next.policy.min_swap_bytes = 1ull << 30;
  Update(next);
  auto refused = next_outcome(1);
  ASSERT_TRUE(refused.is_object()) << Describe(client->id()).dump(2);
  EXPECT_EQ(refused["candidates"].size(), 1u) << refused.dump(2);
  EXPECT_FALSE(refused["error"].get<std::string>().empty());

  // Back to swapping, under a lower device limit: the next candidate fits the new limit.
  next.policy.min_swap_bytes = kMiB;
  next.device_limits = {{0, 40 * kMiB}};
  Update(next);
  auto lower = next_outcome(1, true);
  ASSERT_TRUE(lower.is_object()) << Describe(client->id()).dump(2);
  ASSERT_EQ(lower["candidates"].size(), 2u) << lower.dump(2);
  EXPECT_LE(lower["candidates"][1]["predicted_peak_bytes"].get<std::uint64_t>(), 40 * kMiB);
  EXPECT_GT(lower["candidates"][1]["swaps"].get<int>(), first["candidates"][0]["swaps"].get<int>());
}

TEST_F(LiveOptionsTest, UpdateAfterStopIsRefused) {
  StartDaemon();
  daemon_->Stop();
  thread_.join();
  EXPECT_FALSE(daemon_->UpdateOptions(options_));
  daemon_.reset();
}

}  // namespace
}  // namespace chameleon::daemon::testing
