// End to end through the socket with fake clients: detection, stages, policies, detailed mode.
#include <sys/socket.h>

#include <algorithm>
#include <map>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/policy_mailbox.h"
#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

// One published candidate per configuration: these tests count generations, not distinct plans.
class SessionTest : public DaemonTest {
 protected:
  void Configure(DaemonOptions* options) override { options->deduplicate_candidates = false; }

  /// Starts the daemon, connects a client and pushes `steps` steps of `spec`'s loop: the first
  /// `first` alone and the rest once the boundary is found (so that they are cut one by one as
  /// they arrive), or all at once when `first` is 0. Returns the client's description once every
  /// step is cut (null when something failed, with the failure reported).
  nlohmann::json RunLoop(const LoopSpec& spec, int steps, int first = 0) {
    StartDaemon();
    auto client = Connect();
    if (client == nullptr) return nullptr;
    PushSteps(*client, spec, 0, first);
    if (first > 0) {
      EXPECT_TRUE(
          WaitFor([&] { return Describe(client->id())["boundary"]["found_at_iteration"] > 0; }));
    }
    PushSteps(*client, spec, first, steps);
    EXPECT_TRUE(WaitDrained(*client));
    EXPECT_TRUE(
        WaitFor([&] { return Describe(client->id())["iterations"].get<int>() >= steps - 1; }));
    return Describe(client->id());
  }
};

TEST_F(SessionTest, ClientReachesStableAndReceivesTheBoundary) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  client->Name(20, "embedding_forward");
  LoopSpec spec;
  PushSteps(*client, spec, 0, 16);
  ASSERT_TRUE(WaitFor([&] { return Describe(client->id())["stage"] == "STABLE"; }))
      << Describe(client->id()).dump(2);
  const auto d = Describe(client->id());
  EXPECT_EQ(d["iteration_ops"].get<std::size_t>(), StepOps(spec, 0).size());
  EXPECT_EQ(d["shifts"].get<int>(), 0);
  EXPECT_EQ(d["boundary"]["source"], "detected");
  // Entering GEN_POLICY asked the shim for one detailed iteration.
  EXPECT_NE(client->header()->control_flags.load() & ipc::kControlDetailedIteration, 0u);
  EXPECT_GE(client->header()->detail_request_seq.load(), 1u);
  // The mailbox carries the boundary signature and the stage.
  auto reader = client->segment().mailbox_reader();
  ASSERT_EQ(reader.Poll(), ipc::ReadResult::kNew);
  ipc::Policy policy;
  ASSERT_EQ(ipc::DecodePolicy(reader.blob(), &policy), ipc::BlobError::kOk);
  EXPECT_EQ(policy.summary.stage, static_cast<std::uint32_t>(ipc::Stage::kStable));
  EXPECT_EQ(policy.summary.iteration_ops, StepOps(spec, 0).size());
  EXPECT_EQ(policy.boundary, d["boundary"]["signature"].get<std::vector<std::uint32_t>>());
  EXPECT_EQ(policy.summary.generation, reader.generation());
  // Clients listing says the same.
  const auto clients = Control({{"command", "clients"}});
  ASSERT_EQ(clients["clients"].size(), 1u);
  EXPECT_EQ(clients["clients"][0]["stage"], "STABLE");
}

TEST_F(SessionTest, ShiftsAreCountedAndTheStageRestarts) {
  LoopSpec spec;
  spec.dynamic = 6;
  const auto d = RunLoop(spec, 30);
  ASSERT_FALSE(HasFailure());
  std::vector<int> truth;
  auto stream = MakeLoop(spec, 30);
  for (int s : stream.shift_steps) truth.push_back(s);
  const auto detected = d["shift_iterations"].get<std::vector<int>>();
  ASSERT_EQ(detected.size(), truth.size()) << d.dump(2);
  for (std::size_t i = 0; i < truth.size(); ++i) EXPECT_LE(std::abs(detected[i] - 1 - truth[i]), 1);
}

// PlanMemory remembers only plans: this fake never answers the detailed-iteration request, so
// each STABLE comes without one under the device's limit (a failure to plan, which the next
// return of the sequence must try again rather than recall). The loop's auxiliary branch is on
// in steps 16-31; at step 32 it returns to its first sequence.
TEST_F(SessionTest, AReturnToASequenceStableWithoutAPlanGoesThroughTheStagesAgain) {
  LoopSpec spec;
  spec.dynamic = 16;
  // The boundary first, so that the stages see the later steps one iteration at a time.
  const auto d = RunLoop(spec, 40, 8);
  ASSERT_FALSE(HasFailure());
  const auto shifts = d["shift_iterations"].get<std::vector<int>>();
  ASSERT_EQ(shifts.size(), 2u) << d.dump(2);  // steps 16 and 32 (iterations 17 and 33)
  const auto stables = d["stable_iterations"].get<std::vector<int>>();
  EXPECT_EQ(stables.size(), 2u) << d.dump(2);  // both sequences once, through the stages
  EXPECT_NE(d["stage"], "STABLE");  // 7 iterations after the return: too few for the stages
  EXPECT_EQ(d["policy"]["remembered"]["plans"].get<int>(), 0) << d["policy"].dump(2);
  EXPECT_EQ(d["policy"]["remembered"]["recalls"].get<int>(), 0);
}

TEST_F(SessionTest, BoundaryPatternOverridesDetection) {
  options_.detection.boundary_patterns = {"*loss_fwd*"};
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  client->Name(40, "void loss_fwd_kernel<float>(float*)");
  LoopSpec spec;
  PushSteps(*client, spec, 0, 12);
  ASSERT_TRUE(WaitFor([&] { return Describe(client->id())["stage"] == "STABLE"; }));
  const auto d = Describe(client->id());
  EXPECT_EQ(d["boundary"]["source"], "pattern");
  EXPECT_EQ(d["boundary"]["signature"], nlohmann::json::array({40}));
  EXPECT_EQ(d["boundary"]["names"][0], "void loss_fwd_kernel<float>(float*)");
  EXPECT_EQ(d["iteration_ops"].get<std::size_t>(), StepOps(spec, 0).size());
}

TEST_F(SessionTest, DetailedIterationBecomesAProfileAndCandidatePolicies) {
  // The fake activations are 256 KiB: one executor chunk each (with the default 2 MiB chunks the
  // 53 of them would need 106 MiB).
  options_.policy.chunk_bytes = 256 << 10;
  StartDaemon();
  // 32 MiB of device memory: the detailed iteration peaks above it, so candidates swap.
  auto client = Connect(24ull << 20);
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  ASSERT_TRUE(client->Alloc(1, 1 << 20));
  PushSteps(*client, spec, 0, 6);
  ASSERT_TRUE(WaitFor([&] { return client->DetailedRequested(); }));
  ASSERT_EQ(Describe(client->id())["stage"], "GEN_POLICY");
  // The shim answers the request: the next iteration in detailed mode, then normal ones, each
  // iteration end marked with its device time.
  ASSERT_TRUE(client->Mark(6, 1'000'000, 0));
  PushDetailedStep(*client, spec, 6);
  // The shim's op times for the first and the last op, before the closing mark.
  const auto last_op = static_cast<std::uint32_t>(StepOps(spec, 6).size() - 1);
  ASSERT_TRUE(client->OpTimes({{0, 300'000}, {last_op, 50'000}}));
  ASSERT_TRUE(client->Mark(7, 2'000'000, StepOps(spec, 6).size()));
  client->header()->detail_done_seq.store(client->header()->detail_request_seq.load());
  PushSteps(*client, spec, 7, 8);
  ASSERT_TRUE(WaitDrained(*client));
  const auto d = Describe(client->id());
  ASSERT_TRUE(d["profile"].is_object()) << d.dump(2);
  EXPECT_EQ(d["profile"]["ops"].get<std::size_t>(), StepOps(spec, 6).size());
  EXPECT_DOUBLE_EQ(d["profile"]["iteration_s"].get<double>(), 0.002);
  EXPECT_EQ(client->header()->control_flags.load() & ipc::kControlDetailedIteration, 0u);
  // dump-profile returns the documented profile JSON.
  const auto dump = Control({{"command", "dump-profile"}, {"id", client->id()}});
  ASSERT_TRUE(dump["ok"].get<bool>()) << dump.dump();
  EXPECT_EQ(dump["profile"]["ops"].size(), StepOps(spec, 6).size());
  EXPECT_DOUBLE_EQ(dump["profile"]["ops"][0]["device_s"].get<double>(), 300e-6);
  EXPECT_DOUBLE_EQ(dump["profile"]["ops"][last_op]["device_s"].get<double>(), 50e-6);
  EXPECT_FALSE(dump["profile"]["ops"][1].contains("device_s"));  // not measured
  // One candidate per GEN_POLICY step, each published as a new generation.
  for (int step = 8; step < 14; ++step) {
    const auto before = Describe(client->id())["policy"]["candidates"].size();
    PushSteps(*client, spec, step, step + 1);
    ASSERT_TRUE(client->Mark(std::uint64_t(step) + 1, 2'000'000 - std::uint64_t(step) * 1000, 0));
    if (Describe(client->id())["stage"] != "GEN_POLICY") break;
    WaitFor([&] { return Describe(client->id())["policy"]["candidates"].size() > before; }, 3000);
    client->header()->policy_generation_applied.store(
        Describe(client->id())["generation"].get<std::uint64_t>());
  }
  const auto after = Describe(client->id());
  EXPECT_GE(after["policy"]["candidates"].size(), 2u) << after.dump(2);
  EXPECT_TRUE(after["policy"]["error"].get<std::string>().empty()) << after["policy"]["error"];
}

TEST_F(SessionTest, RecordsDroppedDuringTheDetailedIterationAskAgain) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  PushSteps(*client, spec, 0, 6);
  ASSERT_TRUE(WaitFor([&] { return client->DetailedRequested(); }));
  const auto first_request = client->header()->detail_request_seq.load();
  client->header()->records_dropped.store(3);  // the ring overflowed meanwhile
  PushDetailedStep(*client, spec, 6);
  PushSteps(*client, spec, 7, 8);
  ASSERT_TRUE(WaitDrained(*client));
  EXPECT_EQ(client->header()->detail_request_seq.load(), first_request + 1);
  EXPECT_NE(client->header()->control_flags.load() & ipc::kControlDetailedIteration, 0u);
  EXPECT_TRUE(Describe(client->id())["profile"].is_null());
}

TEST_F(SessionTest, TwoConcurrentClientsAreTrackedIndependently) {
  StartDaemon();
  auto a = Connect();
  auto b = Connect();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  LoopSpec small, large;
  small.layers = 3;
  large.layers = 9;
  large.dynamic = 5;
  std::thread ta([&] { PushSteps(*a, small, 0, 16); });
  std::thread tb([&] { PushSteps(*b, large, 0, 16); });
  ta.join();
  tb.join();
  ASSERT_TRUE(WaitFor([&] {
    a->Heartbeat();
    b->Heartbeat();
    return Describe(a->id())["stage"] == "STABLE";
  }));
  ASSERT_TRUE(WaitDrained(*b));
  // Detection runs on the thread pool: slow under a sanitizer on a loaded machine.
  ASSERT_TRUE(WaitFor([&] {
    b->Heartbeat();
    return Describe(b->id())["boundary"]["signature"] != nlohmann::json::array();
  }));
  const auto da = Describe(a->id());
  const auto db = Describe(b->id());
  EXPECT_NE(da["slot"], db["slot"]);
  EXPECT_EQ(da["iteration_ops"].get<std::size_t>(), StepOps(small, 0).size());
  EXPECT_EQ(da["shifts"].get<int>(), 0);
  EXPECT_GE(db["shifts"].get<int>(), 2);  // the branch switched on at step 5 and off at 10
  EXPECT_NE(db["boundary"]["signature"], nlohmann::json::array());
}

// Candidates judged by device time of the iterations run entirely under them (layout-1.1 marks).
class CandidateTimingTest : public DaemonTest {
  void Configure(DaemonOptions* options) override {
    options->detection.stage_n = 12;
    options->deduplicate_candidates = false;  // the fake's candidates all plan the same swaps
  }
};

TEST_F(CandidateTimingTest, IntervalsAreCreditedOnlyToTheGenerationInForceAtBothEnds) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  auto generation = [&] { return Describe(client->id())["generation"].get<std::uint64_t>(); };
  auto candidates = [&] { return Describe(client->id())["policy"]["candidates"]; };
  // Boundary 1 starts the detailed iteration, boundary 2 ends it.
  const std::uint64_t g0 = RecordDetailedIteration(*client, spec);
  ASSERT_FALSE(HasFailure());
  PushSteps(*client, spec, 7, 8);
  // The detailed interval's own device time (1) is not the profile's: detailed mode may slow it.
  ASSERT_TRUE(client->MarkTimed(3, g0, 1, 9'000'000));
  ASSERT_TRUE(client->MarkTimed(4, g0, 2, 1'500'000));  // interval 2: after it, same generation
  ASSERT_TRUE(WaitDrained(*client));
  EXPECT_DOUBLE_EQ(Describe(client->id())["profile"]["iteration_s"].get<double>(), 0.0);
  EXPECT_TRUE(candidates().empty());
  ASSERT_TRUE(client->MarkTimed(5, g0, 3, 1'000'000));  // the second sample; the best counts
  ASSERT_TRUE(WaitFor([&] { return candidates().size() == 1; }));
  EXPECT_DOUBLE_EQ(Describe(client->id())["profile"]["iteration_s"].get<double>(), 0.001);
  EXPECT_EQ(Describe(client->id())["profile"]["clock"], "device");
  const std::uint64_t c0 = generation();
  // The shim applies c0 during interval 6 (boundary 7 is the first under it). Interval 6 began
  // under g0: not c0's, although its time would be c0's best. Interval 7 ran under c0 at both
  // ends: c0's.
  PushSteps(*client, spec, 8, 9);
  ASSERT_TRUE(client->MarkTimed(6, g0, 4, 1'000'000));
  ASSERT_TRUE(client->MarkTimed(7, c0, 5, 1'000'000));
  ASSERT_TRUE(client->MarkTimed(8, c0, 6, 500'000));
  ASSERT_TRUE(WaitDrained(*client));
  EXPECT_EQ(candidates().size(), 1u);  // the next candidate waits for c0's measurement
  PushSteps(*client, spec, 9, 10);
  ASSERT_TRUE(client->MarkTimed(9, c0, 7, 3'000'000));
  ASSERT_TRUE(WaitFor([&] { return candidates().size() == 2; }));
  const std::uint64_t c1 = generation();
  ASSERT_NE(c1, c0);
  PushSteps(*client, spec, 10, 11);
  ASSERT_TRUE(client->MarkTimed(10, c1, 8, 4'000'000));   // interval 8: c0's, not its best
  ASSERT_TRUE(client->MarkTimed(11, c1, 9, 100'000));     // interval 9 began under c0: nobody's
  ASSERT_TRUE(client->MarkTimed(12, c1, 10, 2'500'000));  // interval 10: c1's
  ASSERT_TRUE(client->MarkTimed(13, c1, 11, 2'000'000));  // interval 11: c1's
  ASSERT_TRUE(WaitDrained(*client));
  auto list = candidates();
  ASSERT_GE(list.size(), 2u);
  EXPECT_EQ(list[0]["generation"].get<std::uint64_t>(), c0);
  EXPECT_DOUBLE_EQ(list[0]["measured_iteration_s"].get<double>(), 0.003);
  EXPECT_EQ(list[1]["generation"].get<std::uint64_t>(), c1);
  EXPECT_DOUBLE_EQ(list[1]["measured_iteration_s"].get<double>(), 0.002);  // the best of its two
  // STABLE keeps the candidate with the best measured device time. The next candidate is never
  // measured (no more marks): once the hold on GEN_POLICY gives up on it, the next step moves on.
  PushSteps(*client, spec, 11, 26);
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    return !Describe(client->id())["stage_hold"].get<bool>();
  }));
  PushSteps(*client, spec, 26, 28);
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    return Describe(client->id())["stage"] == "STABLE";
  })) << Describe(client->id()).dump(2);
  EXPECT_EQ(Describe(client->id())["policy"]["chosen"]["generation"].get<std::uint64_t>(), c1);
}

// Under a limit the shim's streams wait for its swap executor; a layout-1.7 mark says how long
// within its interval (measured on simgpu's virtual clocks), and the profile is timed without it.
TEST_F(CandidateTimingTest, TheProfileIsTimedWithoutTheExecutorsMeasuredWaits) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  const std::uint64_t g0 = RecordDetailedIteration(*client, spec);
  ASSERT_FALSE(HasFailure());
  PushSteps(*client, spec, 7, 8);
  ASSERT_TRUE(client->MarkTimed(3, g0, 1, 9'000'000));
  // Interval 2: 1.5 ms of which 0.6 ms waiting; interval 3: 1.0 ms of which 0.2 ms. The best
  // compute time of the two is the profile's (without the waits: 1.0 ms).
  ASSERT_TRUE(client->MarkTimed(4, g0, 2, 1'500'000, ipc::kFlagExecutorWait, 600'000));
  ASSERT_TRUE(client->MarkTimed(5, g0, 3, 1'000'000, ipc::kFlagExecutorWait, 200'000));
  ASSERT_TRUE(WaitFor([&] { return !Describe(client->id())["policy"]["candidates"].empty(); }));
  EXPECT_NEAR(Describe(client->id())["profile"]["iteration_s"].get<double>(), 0.0008, 1e-12);
}

// The paper's n = 5 with a fake shim that applies each new generation at its next boundary and
// reports every interval's device time one boundary later (the host runs ahead of the device).
class CandidateBudgetTest : public DaemonTest {
  // The fake's candidates all plan the same (empty) swaps: measure each configuration anyway.
  void Configure(DaemonOptions* options) override { options->deduplicate_candidates = false; }
};

TEST_F(CandidateBudgetTest, EveryCandidateIsMeasuredBeforeStableAndTheFastestIsChosen) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  PushSteps(*client, spec, 0, 6);
  ASSERT_TRUE(WaitFor([&] { return client->DetailedRequested(); }));
  auto describe = [&] { return Describe(client->id()); };
  // Device time of an interval run under generation g: distinct per generation, not monotonic,
  // so "the fastest" is not simply the first or the last candidate.
  auto device_ns = [](std::uint64_t g) { return 1'000'000 + (g * 7919 % 11) * 50'000; };
  std::uint64_t in_force = describe()["generation"].get<std::uint64_t>();
  ASSERT_TRUE(client->MarkTimed(1, in_force, 0, 0));
  PushDetailedStep(*client, spec, 6);
  ASSERT_TRUE(client->MarkTimed(2, in_force, 0, 0));
  client->header()->detail_done_seq.store(client->header()->detail_request_seq.load());
  std::uint64_t boundary = 3;
  std::uint64_t previous = in_force;  // generation of interval boundary - 1
  std::uint64_t measured_at = 0;      // boundary at which the last candidate got measured
  const std::size_t configs = std::size_t(options_.detection.stage_n) + 1;
  for (int step = 7; step < 60 && describe()["stage"] != "STABLE"; ++step) {
    ASSERT_TRUE(client->MarkTimed(boundary, in_force, boundary - 1, device_ns(previous)));
    PushSteps(*client, spec, step, step + 1);
    ASSERT_TRUE(WaitDrained(*client));
    auto list = describe()["policy"]["candidates"];
    if (list.size() == configs && list.back()["measured_iteration_s"].get<double>() > 0 &&
        measured_at == 0) {
      measured_at = boundary;
    }
    if (!list.empty() && list.size() < configs &&
        list.back()["measured_iteration_s"].get<double>() > 0) {
      // Measured: the daemon generates the next candidate without waiting for another step.
      ASSERT_TRUE(
          WaitFor([&] { return describe()["policy"]["candidates"].size() > list.size(); }, 5000))
          << describe().dump(2);
    } else if (list.empty() && describe()["profile"]["iteration_s"].get<double>() > 0) {
      ASSERT_TRUE(WaitFor([&] { return !describe()["policy"]["candidates"].empty(); }, 5000));
    }
    previous = in_force;
    in_force = describe()["generation"].get<std::uint64_t>();  // applied at the next boundary
    ++boundary;
  }
  const auto d = describe();
  ASSERT_EQ(d["stage"], "STABLE") << d.dump(2);
  const auto list = d["policy"]["candidates"];
  ASSERT_EQ(list.size(), configs) << d.dump(2);
  std::uint64_t fastest = 0;
  double best = 0;
  for (const auto& c : list) {
    const double s = c["measured_iteration_s"].get<double>();
    EXPECT_DOUBLE_EQ(s, device_ns(c["generation"].get<std::uint64_t>()) * 1e-9) << c.dump();
    if (fastest == 0 || s < best) {
      fastest = c["generation"].get<std::uint64_t>();
      best = s;
    }
  }
  EXPECT_EQ(d["policy"]["chosen"]["generation"].get<std::uint64_t>(), fastest);
  // The hold let go as soon as the last candidate was measured, not at its step bound.
  ASSERT_NE(measured_at, 0u);
  EXPECT_LE(boundary - measured_at, 2u) << d.dump(2);
}

// Marks with kFlagGenerationInstalled (the shim's executor names the generation it installed at
// each boundary): the next candidate is planned while the last is on trial and published as soon
// as a mark says the last one is installed, so each candidate runs exactly one interval and is
// measured on it; the mark that measures the last one releases the hold, and STABLE follows at
// once, without another step.
TEST_F(CandidateBudgetTest, ShouldTryOneCandidatePerIntervalWhenMarksNameTheInstalledGeneration) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  PushSteps(*client, spec, 0, 6);
  ASSERT_TRUE(WaitFor([&] { return client->DetailedRequested(); }));
  auto describe = [&] { return Describe(client->id()); };
  auto device_ns = [](std::uint64_t g) { return 1'000'000 + (g * 7919 % 11) * 50'000; };
  constexpr std::uint16_t kInstalled = ipc::kFlagGenerationInstalled;
  std::uint64_t in_force = describe()["generation"].get<std::uint64_t>();
  ASSERT_TRUE(client->MarkTimed(1, in_force, 0, 0, kInstalled));
  PushDetailedStep(*client, spec, 6);
  ASSERT_TRUE(client->MarkTimed(2, in_force, 0, 0, kInstalled));
  client->header()->detail_done_seq.store(client->header()->detail_request_seq.load());
  const std::size_t configs = std::size_t(options_.detection.stage_n) + 1;
  std::map<std::uint64_t, std::uint64_t> installed_at;  // generation -> boundary
  std::uint64_t previous = in_force;
  std::uint64_t boundary = 3;
  for (int step = 7; step < 40 && describe()["stage"] != "STABLE"; ++step, ++boundary) {
    // Boundary `boundary` installs what the daemon published last; its mark reports the
    // interval before it (the host one interval ahead of the device).
    in_force = describe()["generation"].get<std::uint64_t>();
    installed_at.emplace(in_force, boundary);
    ASSERT_TRUE(
        client->MarkTimed(boundary, in_force, boundary - 1, device_ns(previous), kInstalled));
    PushSteps(*client, spec, step, step + 1);
    ASSERT_TRUE(WaitDrained(*client));
    const auto list = describe()["policy"]["candidates"];
    if (describe()["stage"] != "STABLE" && !list.empty() && list.size() < configs &&
        list.back()["generation"].get<std::uint64_t>() == in_force) {
      // Installed at this boundary: the next one is published before the next boundary, without
      // waiting for this one's measurement.
      ASSERT_TRUE(
          WaitFor([&] { return describe()["policy"]["candidates"].size() > list.size(); }, 5000))
          << describe().dump(2);
    } else if (list.empty() && describe()["profile"]["iteration_s"].get<double>() > 0) {
      ASSERT_TRUE(WaitFor([&] { return !describe()["policy"]["candidates"].empty(); }, 5000));
    }
    previous = in_force;
  }
  const auto d = describe();
  ASSERT_EQ(d["stage"], "STABLE") << d.dump(2);
  const auto list = d["policy"]["candidates"];
  ASSERT_EQ(list.size(), configs) << d.dump(2);
  std::uint64_t first = 0, last = 0, fastest = 0;
  double best = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::uint64_t g = list[i]["generation"].get<std::uint64_t>();
    ASSERT_EQ(installed_at.count(g), 1u) << g;
    // Consecutive intervals, one each, and each measured on its own.
    if (i == 0) first = installed_at[g];
    EXPECT_EQ(installed_at[g], first + i) << d.dump(2);
    last = installed_at[g];
    const double s = list[i]["measured_iteration_s"].get<double>();
    EXPECT_DOUBLE_EQ(s, device_ns(g) * 1e-9) << list[i].dump();
    if (fastest == 0 || s < best) {
      fastest = g;
      best = s;
    }
  }
  EXPECT_EQ(d["policy"]["chosen"]["generation"].get<std::uint64_t>(), fastest);
  // STABLE came with the mark that measured the last candidate (boundary last + 1): no later
  // boundary was needed.
  EXPECT_EQ(boundary, last + 2) << d.dump(2);
}

// A candidate whose measurement never comes (the shim stopped marking) does not hold GEN_POLICY
// for ever: the hold lets go after a few iterations without progress.
TEST_F(CandidateBudgetTest, AHoldWithoutProgressLetsGo) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  LoopSpec spec;
  const std::uint64_t g0 = RecordDetailedIteration(*client, spec);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(client->MarkTimed(3, g0, 1, 1'000'000));
  ASSERT_TRUE(client->MarkTimed(4, g0, 2, 1'000'000));
  ASSERT_TRUE(client->MarkTimed(5, g0, 3, 1'000'000));
  ASSERT_TRUE(WaitFor([&] { return Describe(client->id())["policy"]["candidates"].size() == 1; }));
  // No more marks: the candidate is never measured. Past n the hold keeps GEN_POLICY ...
  PushSteps(*client, spec, 7, 14);
  ASSERT_TRUE(WaitDrained(*client));
  // ... until more than four iterations and a second have passed without progress.
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    return !Describe(client->id())["stage_hold"].get<bool>();
  }));
  PushSteps(*client, spec, 14, 16);
  ASSERT_TRUE(WaitDrained(*client));
  const auto d = Describe(client->id());
  EXPECT_EQ(d["stage"], "STABLE") << d.dump(2);
  EXPECT_GE(d["stage_hold_steps"].get<int>(), 1);
  EXPECT_EQ(d["policy"]["candidates"].size(), 1u);
}

}  // namespace
}  // namespace chameleon::daemon::testing
