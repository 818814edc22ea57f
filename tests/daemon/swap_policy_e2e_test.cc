// A policy that names the wrong tensors: the test plays the daemon (shim/testing's FakeDaemon on
// the ipc library), watches one iteration of the trainer's op stream and publishes a policy whose
// entries match no tensor, swap out a tensor the step still needs, or bind a tensor the step
// frees before its swap-in. The trainer must finish with the unlimited run's results, the shim
// must count the entries it ignored, and nothing may fault.
#include <set>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/policy_blob.h"
#include "fake_daemon.h"
#include "swap_e2e_fixture.h"

namespace chameleon::daemon::testing {
namespace {

using shim::testing::Record;

/// One op of the observed iteration: its token, occurrence of that token in the iteration (the
/// shim counts per token from the boundary) and tensor ids (launches only).
struct Op {
  std::uint32_t token = 0, occurrence = 0;
  std::vector<std::uint64_t> tensors;
};

/// What the fake daemon saw of one whole iteration: ops after one boundary op up to and
/// including the next, and the allocations made and freed in it.
struct Iteration {
  std::vector<Op> ops;
  std::set<std::uint64_t> freed;
};

std::uint32_t OpToken(const Record& r) {
  switch (r.type) {
    case ipc::RecordType::kLaunch:
      return r.As<ipc::LaunchRecord>().token;
    case ipc::RecordType::kCopy:
      return r.As<ipc::CopyRecord>().token;
    case ipc::RecordType::kMemset:
      return r.As<ipc::MemsetRecord>().token;
    default:
      return 0;
  }
}

class WrongPolicyTest : public SwapE2ETest {
 protected:
  /// Drains `client` until it has seen boundary op number 3 (of `boundary_name`); returns the
  /// iteration between the second and the third, and the boundary token.
  static bool Observe(shim::testing::FakeClient* client, const std::string& boundary_name,
                      std::uint32_t* boundary, Iteration* it,
                      std::map<std::uint64_t, std::uint64_t>* bytes) {
    int seen = 0;
    std::map<std::uint32_t, std::uint32_t> occurrences;
    return WaitFor(
        [&] {
          for (const Record& r : client->Drain()) {
            if (r.type == ipc::RecordType::kAlloc) {
              const auto a = r.As<ipc::AllocRecord>();
              (*bytes)[a.id] = a.bytes;
            } else if (r.type == ipc::RecordType::kFree && seen == 2) {
              it->freed.insert(r.As<ipc::FreeRecord>().id);
            }
            const std::uint32_t token = OpToken(r);
            if (token == 0 || seen >= 3) continue;
            if (seen == 2) {
              Op op{token, occurrences[token]++, {}};
              if (r.type == ipc::RecordType::kLaunch) op.tensors = r.Tensors();
              it->ops.push_back(op);
            }
            auto name = client->names.find(token);
            if (name != client->names.end() && name->second == boundary_name) {
              *boundary = token;
              ++seen;
            }
          }
          return seen >= 3;
        },
        60000);
  }
};

TEST_F(WrongPolicyTest, EntriesNamingWrongOrFreedTensorsAreIgnoredAndResultsStayIdentical) {
  std::vector<std::string> args = kSmallTrainer;
  args.insert(args.end(), {"--steps", "12"});
  const RunOutput plain = Run("plain", args, PlainEnv());
  const std::uint64_t limit = Number(plain.out, "peak") / 2;
  shim::testing::FakeDaemon fake;
  ASSERT_TRUE(fake.Start(socket_));
  const Child child = Start("limited", args, LimitedEnv(limit, "limited"));
  ASSERT_TRUE(fake.WaitForClients(1, 20000));
  shim::testing::FakeClient* client = fake.client(0);
  std::uint32_t boundary = 0;
  Iteration it;
  std::map<std::uint64_t, std::uint64_t> bytes;
  ASSERT_TRUE(Observe(client, "train_sim_embed_fwd", &boundary, &it, &bytes));

  ipc::Policy policy;
  policy.summary.generation = 1;
  policy.summary.stage = static_cast<std::uint32_t>(ipc::Stage::kStable);
  policy.summary.iteration_ops = it.ops.size();
  policy.boundary = {boundary};
  constexpr std::uint32_t kNever = 0x7ffffff0;  // a token no op has
  auto entry = [&](const Op& out, std::uint16_t arg, std::uint64_t size) {
    ipc::SwapEntry e{};
    e.bytes = size;
    e.out_token = out.token;
    e.out_occurrence = out.occurrence;
    e.out_arg = arg;
    e.in_token = e.use_token = kNever;
    return e;
  };
  // 1. Matches nothing: no tensor of the boundary op has 12,345 bytes.
  policy.entries.push_back(entry(it.ops.back(), 0, 12345));
  // 2. The wrong tensor: swapped out although later ops of the step use it, never swapped back
  //    in by the policy (its in/use anchors never occur): the safety net must bring it back.
  // 3. A freed tensor: bound at its out anchor, freed later in the step; its swap-in (the next
  //    boundary op) finds it gone.
  bool needed_found = false, freed_found = false;
  for (std::size_t i = 0; i < it.ops.size(); ++i) {
    for (std::uint16_t a = 0; a < it.ops[i].tensors.size(); ++a) {
      const std::uint64_t id = it.ops[i].tensors[a];
      if (bytes[id] < (64u << 10)) continue;  // passed through, not the executor's
      bool used_later = false;
      for (std::size_t j = i + 1; j < it.ops.size(); ++j) {
        for (std::uint64_t t : it.ops[j].tensors) used_later |= t == id;
      }
      if (!needed_found && used_later && !it.freed.count(id)) {
        policy.entries.push_back(entry(it.ops[i], a, bytes[id]));
        needed_found = true;
      } else if (!freed_found && !used_later && it.freed.count(id)) {
        ipc::SwapEntry e = entry(it.ops[i], a, bytes[id]);
        e.in_token = e.use_token = boundary;
        e.in_occurrence = e.use_occurrence = 0;
        e.entry_flags = ipc::kEntryWraps;
        policy.entries.push_back(e);
        freed_found = true;
      }
    }
  }
  ASSERT_TRUE(needed_found && freed_found) << "no suitable tensors in " << it.ops.size() << " ops";
  std::vector<std::uint8_t> blob;
  ipc::EncodePolicy(policy, &blob);
  ASSERT_EQ(client->mailbox.Publish(blob), ipc::PublishResult::kOk);

  const RunOutput limited = Finish(child);
  ExpectIdentical(limited, plain);
  EXPECT_LE(HighWater(limited.err), limit);
  auto stats = ExecutorStats(StatsFile("limited"));
  for (const char* key : {"policy_ignored", "fault_ins", "swap_out_bytes", "iterations"}) {
    RecordProperty(key, std::to_string(stats[key]));  // in --gtest_output reports
  }
  EXPECT_EQ(stats["policy_generation"], 1u) << limited.err.substr(0, 2000);
  EXPECT_GT(stats["policy_ignored"], 0u);
  EXPECT_GT(stats["fault_ins"], 0u);
}

}  // namespace
}  // namespace chameleon::daemon::testing
