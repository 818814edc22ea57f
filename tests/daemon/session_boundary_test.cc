// A session whose boundary changes under it (lost, or replaced by a pattern whose kernel appears
// late) and STABLE stages reached without a plan: through the socket with fake clients.
#include <regex>

#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

class SessionBoundaryTest : public DaemonTest {
 protected:
  /// The slot-0 series `name` from the daemon's metrics (-1: absent).
  double SlotMetric(const std::string& name) {
    const std::string text = Control({{"command", "metrics"}})["text"];
    std::smatch m;
    const std::regex re(name + "\\{client=\"0\"\\} ([0-9.e+]+)");
    return std::regex_search(text, m, re) ? std::stod(m[1]) : -1;
  }
  /// Steps into GEN_POLICY (from step `from`, the ones before it pushed already) and answers the
  /// detailed-iteration request (1.0 marks) with the step after the request, `*detailed`; the next
  /// step to push is then `*detailed + 2`. Steps are pushed until the daemon asks (at step 6 on a
  /// quiet machine): under a sanitizer's slowness detection may first settle on a shorter period
  /// and need more steps to find the real one.
  void RecordProfile(FakeClient& client, const LoopSpec& spec, int* detailed, int from = 0) {
    int step = 6;
    PushSteps(client, spec, from, step);
    while (!WaitFor(
        [&] {
          client.Heartbeat();
          return client.DetailedRequested();
        },
        500)) {
      ASSERT_LT(step, 48) << "no detailed-iteration request";
      PushSteps(client, spec, step, step + 1);
      ++step;
    }
    *detailed = step;
    ASSERT_TRUE(client.Mark(std::uint64_t(step), 1'000'000, 0));
    PushDetailedStep(client, spec, step);
    ASSERT_TRUE(client.Mark(std::uint64_t(step) + 1, 2'000'000, StepOps(spec, step).size()));
    client.header()->detail_done_seq.store(client.header()->detail_request_seq.load());
    PushSteps(client, spec, step + 1, step + 2);
    ASSERT_TRUE(WaitDrained(client));
  }
};

TEST_F(SessionBoundaryTest, ShouldForgetTheProfileWhenTheBoundaryIsLost) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  int detailed = 0;
  ASSERT_NO_FATAL_FAILURE(RecordProfile(*client, spec, &detailed));
  const auto before = Describe(client->id());
  ASSERT_TRUE(before["profile"].is_object()) << before.dump(2);
  ASSERT_EQ(before["profile"]["ops"].get<std::size_t>(), StepOps(spec, detailed).size());
  const auto first_request = client->header()->detail_request_seq.load();
  // Another loop altogether (a 12-op step without the old signature): the boundary is lost and
  // detected again, and the old loop's profile must not plan anything for the new one.
  // Enough of it that the new loop is most of the history detection runs on (the ops since the
  // old boundary was installed come first in it).
  for (int step = 0; step < 300; ++step) {
    for (std::uint32_t t = 90; t < 102; ++t) ASSERT_TRUE(client->Launch(t));
    client->Heartbeat();
  }
  ASSERT_TRUE(WaitDrained(*client));
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    const auto d = Describe(client->id());
    return d["boundary"]["source"] == "detected" && d["iteration_ops"].get<int>() == 12;
  })) << Describe(client->id()).dump(2);
  const auto d = Describe(client->id());
  EXPECT_EQ(d["boundary"]["losses"].get<int>(), 1);
  EXPECT_TRUE(d["profile"].is_null()) << d.dump(2);
  EXPECT_TRUE(d["policy"]["candidates"].empty()) << d.dump(2);
  // The new loop's GEN_POLICY asks for a detailed iteration of its own.
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    return client->header()->detail_request_seq.load() > first_request &&
           client->DetailedRequested();
  })) << Describe(client->id()).dump(2);
}

TEST_F(SessionBoundaryTest, ShouldNotActOnALayerRunAtTheEndOfAPartlySeenFirstStep) {
  // What a slow drain showed detection under TSan: the first step's forward pass (42 ops) and
  // most of its backward pass, six identical 8-op layers. Over these 101 ops a loop of period 8
  // after a set-up is what the detector finds; nothing may act on it before the stream says.
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  const std::vector<std::uint32_t> first = StepOps(spec, 0);
  for (std::size_t i = 0; i < 101; ++i) ASSERT_TRUE(client->Launch(first[i]));
  // The history stops growing at 101 ops: the stalled-history retry runs detection on all of it.
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    return Describe(client->id())["boundary"]["pending"].get<bool>();
  })) << Describe(client->id()).dump(2);
  auto d = Describe(client->id());
  EXPECT_EQ(d["boundary"]["source"], "none") << d.dump(2);
  EXPECT_EQ(d["iterations"].get<int>(), 0);
  EXPECT_EQ(d["stage"], "WARMUP");
  EXPECT_FALSE(client->DetailedRequested());
  // The rest of the step refutes it; the steps after it are the loop.
  for (std::size_t i = 101; i < first.size(); ++i) ASSERT_TRUE(client->Launch(first[i]));
  int detailed = 0;
  ASSERT_NO_FATAL_FAILURE(RecordProfile(*client, spec, &detailed, 1));
  d = Describe(client->id());
  EXPECT_EQ(d["boundary"]["rejected"].get<int>(), 1) << d.dump(2);
  EXPECT_EQ(d["boundary"]["losses"].get<int>(), 0);
  EXPECT_EQ(d["boundary"]["period_ops"].get<std::size_t>(), first.size());
  EXPECT_EQ(d["profile"]["ops"].get<std::size_t>(), StepOps(spec, detailed).size()) << d.dump(2);
}

TEST_F(SessionBoundaryTest, ShouldLetAPatternWhoseKernelAppearsLateReplaceTheDetectedBoundary) {
  // Shaped like the replayed Megatron trace: identical 20-op layers, then a short tail with the
  // step's one `aten::max`. Its name reaches the daemon only when it is first launched, after
  // detection has taken the layer for the iteration.
  options_.detection.boundary_patterns = {"aten::max"};
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto layer = [&] {
    for (std::uint32_t t = 100; t < 120; ++t) ASSERT_TRUE(client->Launch(t));
  };
  for (int i = 0; i < 12; ++i) layer();
  client->Heartbeat();
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    return Describe(client->id())["boundary"]["source"] == "detected";
  })) << Describe(client->id()).dump(2);
  ASSERT_EQ(Describe(client->id())["boundary"]["period_ops"].get<int>(), 20);
  ASSERT_TRUE(client->Name(77, "aten::max"));
  const std::vector<std::uint32_t> tail{200, 201, 77, 202, 203};
  const std::size_t step_ops = 8 * 20 + tail.size();
  for (int step = 0; step < 14; ++step) {
    for (int i = 0; i < 8; ++i) layer();
    for (std::uint32_t t : tail) ASSERT_TRUE(client->Launch(t));
    client->Heartbeat();
  }
  ASSERT_TRUE(WaitDrained(*client));
  const auto d = Describe(client->id());
  EXPECT_EQ(d["boundary"]["source"], "pattern") << d.dump(2);
  EXPECT_EQ(d["boundary"]["replaced"].get<int>(), 1);
  EXPECT_EQ(d["boundary"]["signature"], nlohmann::json::array({77}));
  EXPECT_EQ(d["iteration_ops"].get<std::size_t>(), step_ops);
  // The stages started again on the pattern's cut: 14 steps cut 13 iterations, STABLE at the
  // (m + n + 3)-th (no marks: the paper's n, no hold).
  EXPECT_EQ(d["stage"], "STABLE") << d.dump(2);
  EXPECT_EQ(d["stable_at_iteration"].get<int>(),
            options_.detection.stage_m + options_.detection.stage_n + 3);
}

TEST_F(SessionBoundaryTest, ShouldCountAStableStageWhoseEveryCandidateWasRefused) {
  StartDaemon();
  // 512 KiB of device memory: the 1 MiB of weights alone do not fit, no plan can.
  auto client = Connect(512 << 10);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Alloc(1, 1 << 20));
  LoopSpec spec;
  int detailed = 0;
  ASSERT_NO_FATAL_FAILURE(RecordProfile(*client, spec, &detailed));
  ASSERT_EQ(SlotMetric("chameleon_policy_empty_stable_total"), 0);
  for (int step = detailed + 2; step < detailed + 18 && Describe(client->id())["stage"] != "STABLE";
       ++step) {
    PushSteps(*client, spec, step, step + 1);
    ASSERT_TRUE(client->Mark(std::uint64_t(step) + 1, 2'000'000, 0));
    ASSERT_TRUE(WaitDrained(*client));
  }
  const auto d = Describe(client->id());
  ASSERT_EQ(d["stage"], "STABLE") << d.dump(2);
  EXPECT_TRUE(d["policy"]["candidates"].empty()) << d.dump(2);
  EXPECT_FALSE(d["policy"]["error"].get<std::string>().empty()) << d.dump(2);
  EXPECT_EQ(SlotMetric("chameleon_policy_empty_stable_total"), 1);
}

TEST_F(SessionBoundaryTest, ShouldNotCountAStableStageWhoseProfileFits) {
  StartDaemon();
  auto client = Connect();  // 1 GiB: the profile fits, the empty plan is the right one
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Alloc(1, 1 << 20));
  LoopSpec spec;
  int detailed = 0;
  ASSERT_NO_FATAL_FAILURE(RecordProfile(*client, spec, &detailed));
  for (int step = detailed + 2; step < detailed + 18 && Describe(client->id())["stage"] != "STABLE";
       ++step) {
    PushSteps(*client, spec, step, step + 1);
    ASSERT_TRUE(client->Mark(std::uint64_t(step) + 1, 2'000'000, 0));
    ASSERT_TRUE(WaitDrained(*client));
  }
  const auto d = Describe(client->id());
  ASSERT_EQ(d["stage"], "STABLE") << d.dump(2);
  ASSERT_FALSE(d["policy"]["candidates"].empty()) << d.dump(2);
  EXPECT_EQ(SlotMetric("chameleon_policy_empty_stable_total"), 0);
}

}  // namespace
}  // namespace chameleon::daemon::testing
