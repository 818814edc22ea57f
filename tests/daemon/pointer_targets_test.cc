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

  static bool Swaps(const ipc::Policy& policy, std::uint64_t key) {
    return std::any_of(policy.entries.begin(), policy.entries.end(),
                       [&](const ipc::SwapEntry& e) { return e.match_key == key; });
  }
};

TEST_F(PointerTargetsTest, AReportedTargetIsExcludedNowAndWhenAllocatedAfresh) {
  StartDaemon();
  LoopSpec spec;
  // Control: without a report, the first candidate swaps some activation; its key is `key`, its
  // allocation in the detailed step (step 6) is `target`.
  auto control = Connect(kDeviceMemory);
  ASSERT_NE(control, nullptr);
  ASSERT_TRUE(control->Alloc(1, 1 << 20));  // the weights
  PushSteps(*control, spec, 0, 6);
  std::uint64_t control_boundary = 1;
  const ipc::Policy unrestricted = DetailToCandidate(*control, spec, 6, &control_boundary, {});
  ASSERT_FALSE(unrestricted.entries.empty()) << "the limit must make candidates swap";
  const std::uint64_t key = unrestricted.entries.front().match_key;
  const policy::Profile profile = DumpProfile(*control);
  const auto features = policy::ComputeFeatures(profile);
  std::uint64_t target = 0;
  for (std::size_t i = 0; i < features.size(); ++i) {
    if (features[i].match_key == key) target = profile.tensors[i].external_id;
  }
  ASSERT_NE(target, 0u);
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
