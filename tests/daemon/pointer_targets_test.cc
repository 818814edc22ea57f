// Pointer-table targets reported by the shim (RecordType::kPointerTargets, layout 1.2) keep their
// tensors out of the daemon's candidates, also in later profiles where the program allocated the
// same tensor afresh (a new allocation id, the same match key).
#include <nlohmann/json.hpp>

#include <algorithm>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/policy_mailbox.h"
#include "chameleon/policy/matcher.h"
#include "chameleon/policy/profile_json.h"
#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

class PointerTargetsTest : public DaemonTest {
 protected:
  // The fake activations are 256 KiB: below the generator's default smallest swap, and a quarter
  // of the executor's default chunk (with which 53 of them would not fit 12 MiB at all).
  void Configure(DaemonOptions* options) override {
    options->policy.min_swap_bytes = 64 << 10;
    options->policy.chunk_bytes = 256 << 10;
  }

  /// Small device memory: the detailed iteration peaks above it, so candidates swap activations.
  static constexpr std::uint64_t kDeviceMemory = 12ull << 20;

  /// From the daemon's detail request to its first candidate: detailed step `step`, then (if not
  /// empty) `report` as the scan at the boundary that closes it, then device-timed intervals.
  /// Returns the candidate as the mailbox carries it.
  ipc::Policy DetailToCandidate(FakeClient& c, const LoopSpec& spec, int step,
                                std::uint64_t* boundary, const std::vector<std::uint64_t>& report) {
    EXPECT_TRUE(WaitFor([&] {
      c.Heartbeat();
      return c.DetailedRequested();
    }));
    const std::uint64_t g = Describe(c.id())["generation"].get<std::uint64_t>();
    std::uint64_t& b = *boundary;
    EXPECT_TRUE(c.MarkTimed(b++, g, 0, 0));  // starts the detailed iteration
    PushDetailedStep(c, spec, step);
    EXPECT_TRUE(c.MarkTimed(b++, g, 0, 0));  // closes it
    c.header()->detail_done_seq.store(c.header()->detail_request_seq.load());
    if (!report.empty()) {
      EXPECT_TRUE(c.PointerTargets(1, report));
    }
    PushSteps(c, spec, step + 1, step + 2);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(c.MarkTimed(b, g, b - 1, 1'000'000));
      ++b;
    }
    EXPECT_TRUE(WaitFor([&] {
      c.Heartbeat();
      return !Describe(c.id())["policy"]["candidates"].empty();
    })) << Describe(c.id()).dump(2);
    const auto candidates = Describe(c.id())["policy"]["candidates"];
    ipc::Policy policy;
    auto reader = c.segment().mailbox_reader();
    EXPECT_EQ(reader.Poll(), ipc::ReadResult::kNew);
    EXPECT_EQ(ipc::DecodePolicy(reader.blob(), &policy), ipc::BlobError::kOk);
    EXPECT_EQ(policy.summary.generation, candidates.back()["generation"].get<std::uint64_t>());
    return policy;
  }

  policy::Profile DumpProfile(FakeClient& c) {
    const auto dump = Control({{"command", "dump-profile"}, {"id", c.id()}});
    EXPECT_TRUE(dump["ok"].get<bool>()) << dump.dump();
    return policy::ProfileFromJson(dump["profile"].dump());
  }

  /// A client's first candidate with no report, the match key of its first swap and that
  /// tensor's allocation in the detailed step (step 6).
  struct FirstSwap {
    ipc::Policy policy;
    std::uint64_t key = 0;
    std::uint64_t target = 0;
  };
  FirstSwap FirstCandidate(FakeClient& c, const LoopSpec& spec, std::uint64_t* boundary) {
    FirstSwap out;
    EXPECT_TRUE(c.Alloc(1, 1 << 20));  // the weights
    PushSteps(c, spec, 0, 6);
    out.policy = DetailToCandidate(c, spec, 6, boundary, {});
    EXPECT_FALSE(out.policy.entries.empty()) << "the limit must make candidates swap";
    if (out.policy.entries.empty()) return out;
    out.key = out.policy.entries.front().match_key;
    out.target = AllocationWithKey(c, out.key);
    EXPECT_NE(out.target, 0u);
    return out;
  }

  /// The allocation id of the tensor with match key `key` in the client's current profile (its
  /// detailed step), or 0.
  std::uint64_t AllocationWithKey(FakeClient& c, std::uint64_t key) {
    const policy::Profile profile = DumpProfile(c);
    const auto features = policy::ComputeFeatures(profile);
    std::uint64_t id = 0;
    for (std::size_t i = 0; i < features.size(); ++i) {
      if (features[i].match_key == key) id = profile.tensors[i].external_id;
    }
    return id;
  }

  static bool Swaps(const ipc::Policy& policy, std::uint64_t key) {
    return std::any_of(policy.entries.begin(), policy.entries.end(),
                       [&](const ipc::SwapEntry& e) { return e.match_key == key; });
  }
};

TEST_F(PointerTargetsTest, AReportedTargetIsExcludedNowAndWhenAllocatedAfresh) {
  // The return after the shift must profile afresh (new allocation ids), not go on from the
  // profile its planning had before the shift (PlanMemory's plans in progress).
  options_.remembered_plans = 0;
  StartDaemon();
  LoopSpec spec;
  // Control: without a report, the first candidate swaps some activation; its key is `key`, its
  // allocation in the detailed step (step 6) is `target`.
  auto control = Connect(kDeviceMemory);
  ASSERT_NE(control, nullptr);
  std::uint64_t control_boundary = 1;
  const FirstSwap unrestricted = FirstCandidate(*control, spec, &control_boundary);
  ASSERT_FALSE(HasFailure());
  const std::uint64_t key = unrestricted.key, target = unrestricted.target;
  control->Disconnect();

  // The same program, whose scan after the detailed iteration reports `target`.
  auto client = Connect(kDeviceMemory);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Alloc(1, 1 << 20));
  PushSteps(*client, spec, 0, 6);
  std::uint64_t boundary = 1;
  const ipc::Policy first = DetailToCandidate(*client, spec, 6, &boundary, {target});
  EXPECT_FALSE(Swaps(first, key));
  EXPECT_FALSE(first.entries.empty());  // other tensors are still swapped
  auto d = Describe(client->id());
  EXPECT_EQ(d["pointer_targets"]["reports"].get<int>(), 1) << d.dump(2);
  EXPECT_GE(d["pointer_targets"]["excluded_keys"].get<int>(), 1);
  EXPECT_GE(d["pointer_targets"]["excluded_tensors"].get<int>(), 1);

  // A sequence shift, then the loop again: a new GEN_POLICY profiles step 16, whose activations
  // have new ids (16000...). Nothing is reported this time; the key still excludes the tensor.
  LoopSpec shifted = spec;
  shifted.layers = spec.layers + 1;
  PushSteps(*client, shifted, 8, 9);
  PushSteps(*client, spec, 9, 16);
  const ipc::Policy later = DetailToCandidate(*client, spec, 16, &boundary, {});
  d = Describe(client->id());
  EXPECT_GE(d["shifts"].get<int>(), 1) << d.dump(2);
  const policy::Profile second = DumpProfile(*client);
  EXPECT_TRUE(std::none_of(second.tensors.begin(), second.tensors.end(),
                           [&](const policy::ProfileTensor& t) { return t.external_id == target; }))
      << "the second profile must not contain the reported allocation itself";
  EXPECT_FALSE(Swaps(later, key));
  EXPECT_FALSE(later.entries.empty());
  EXPECT_EQ(d["pointer_targets"]["reports"].get<int>(), 1);
  EXPECT_GE(d["pointer_targets"]["excluded_tensors"].get<int>(), 1);
}

// A target reported after the first candidate was planned (a scan under pressure finds it later):
// that candidate swaps the tensor, which the shim pins from then on, so its plan runs short of
// memory however fast it measured. STABLE chooses among the candidates planned with the target
// excluded, although the stale one measured fastest.
TEST_F(PointerTargetsTest, ACandidatePlannedBeforeATargetWasReportedIsNotChosen) {
  StartDaemon();
  LoopSpec spec;
  auto client = Connect(kDeviceMemory);
  ASSERT_NE(client, nullptr);
  std::uint64_t boundary = 1;
  const FirstSwap first = FirstCandidate(*client, spec, &boundary);
  ASSERT_FALSE(HasFailure());
  const std::uint64_t key = first.key;
  ASSERT_TRUE(client->PointerTargets(2, {first.target}));

  auto describe = [&] { return Describe(client->id()); };
  const std::uint64_t stale = first.policy.summary.generation;
  // Intervals under the stale candidate measure 0.5 ms, every other one 1 ms.
  auto device_ns = [&](std::uint64_t g) { return g == stale ? 500'000 : 1'000'000; };
  std::uint64_t in_force = describe()["generation"].get<std::uint64_t>();
  std::uint64_t previous = in_force;
  for (int step = 8; step < 60 && describe()["stage"] != "STABLE"; ++step, ++boundary) {
    ASSERT_TRUE(client->MarkTimed(boundary, in_force, boundary - 1, device_ns(previous)));
    PushSteps(*client, spec, step, step + 1);
    ASSERT_TRUE(WaitDrained(*client));
    const auto list = describe()["policy"]["candidates"];
    if (describe()["stage"] != "STABLE" && list.back()["measured_iteration_s"].get<double>() > 0) {
      // Measured: the next candidate (or STABLE, after the last) comes without another step.
      WaitFor([&] {
        const auto d = describe();
        return d["stage"] == "STABLE" || d["policy"]["candidates"].size() > list.size() ||
               d["policy"]["candidates"].size() + d["policy"]["duplicates"].get<std::size_t>() >=
                   std::size_t(options_.detection.stage_n) + 1;
      });
    }
    previous = in_force;
    in_force = describe()["generation"].get<std::uint64_t>();  // applied at the next boundary
  }
  const auto d = describe();
  ASSERT_EQ(d["stage"], "STABLE") << d.dump(2);
  const auto list = d["policy"]["candidates"];
  ASSERT_GE(list.size(), 2u) << d.dump(2);
  ASSERT_EQ(list[0]["generation"].get<std::uint64_t>(), stale);
  EXPECT_DOUBLE_EQ(list[0]["measured_iteration_s"].get<double>(), 500e-6) << d.dump(2);
  EXPECT_LT(list[0]["exclusions_version"].get<std::uint64_t>(),
            list[1]["exclusions_version"].get<std::uint64_t>());
  EXPECT_NE(d["policy"]["chosen"]["generation"].get<std::uint64_t>(), stale) << d.dump(2);
  // What the shim runs from now on: the chosen plan, republished, without the target's key.
  ipc::Policy chosen;
  auto reader = client->segment().mailbox_reader();
  ASSERT_TRUE(WaitFor([&] {
    if (reader.Poll() == ipc::ReadResult::kNew) {
      EXPECT_EQ(ipc::DecodePolicy(reader.blob(), &chosen), ipc::BlobError::kOk);
    }
    return chosen.summary.generation == d["generation"].get<std::uint64_t>();
  }));
  EXPECT_FALSE(chosen.entries.empty());
  EXPECT_FALSE(Swaps(chosen, key));
}

TEST_F(PointerTargetsTest, AMalformedReportDisconnectsOnlyThatClient) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto producer = client->segment().ring_producer();
  // Claims 3 ids, carries 1: the ring refuses it as a bad payload.
  const std::uint64_t bad[3] = {3, 7, 9};  // count 3 (low word), scan 7, one id
  ASSERT_EQ(producer.Push(ipc::RecordType::kPointerTargets, 0, bad, sizeof(bad)),
            ipc::PushResult::kOk);
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  EXPECT_EQ(BadInput("bad_record"), 1u);
  auto other = Connect();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->PointerTargets(1, {0, 5}));  // 0 (untracked) is ignored, 5 kept
  ASSERT_TRUE(WaitDrained(*other));
  const auto d = Describe(other->id());
  EXPECT_EQ(d["pointer_targets"]["reports"].get<int>(), 1) << d.dump(2);
  EXPECT_EQ(d["pointer_targets"]["target_ids"].get<int>(), 1);
}

}  // namespace
}  // namespace chameleon::daemon::testing
