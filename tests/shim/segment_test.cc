// What a daemon sees: the test plays chameleond (FakeDaemon), runs a workload under the shim and
// checks that the segment carries exactly the allocations, frees and ops the workload made, in
// order, with stable named tokens, the right tensor lists, iteration marks, one detailed
// iteration, graph capture flagged, a daemon that appears late, and fork.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "child_process.h"
#include "fake_daemon.h"
#include "test_env.h"

namespace shim_test {
namespace {

namespace ipc = chameleon::ipc;
using chameleon::shim::testing::FakeClient;
using chameleon::shim::testing::FakeDaemon;
using chameleon::shim::testing::Record;

std::string Hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(v));
  return buf;
}

bool IsEventLine(const std::string& line) {
  for (const char* prefix : {"alloc ", "free ", "launch ", "captured ", "copy ", "memset "}) {
    if (line.rfind(prefix, 0) == 0) return true;
  }
  return line == "sync" || line == "graphlaunch";
}

std::vector<std::string> EventLines(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    if (IsEventLine(l)) out.push_back(l);
  }
  return out;
}

/// Turns records back into the workload's own log format (ids -> addresses, tokens -> names).
class Describer {
 public:
  std::string Describe(const Record& r, const std::map<std::uint32_t, std::string>& names) {
    switch (r.type) {
      case ipc::RecordType::kAlloc: {
        const auto a = r.As<ipc::AllocRecord>();
        address_[a.id] = a.address;
        return "alloc " + Hex(a.address) + " " + std::to_string(a.bytes);
      }
      case ipc::RecordType::kFree:
        return "free " + Hex(address_[r.As<ipc::FreeRecord>().id]);
      case ipc::RecordType::kLaunch: {
        const auto l = r.As<ipc::LaunchRecord>();
        if (l.token == ipc::kTokenGraphLaunch) return "graphlaunch";
        auto it = names.find(l.token);
        std::string s = (r.flags & ipc::kFlagCapture) ? "captured " : "launch ";
        s += it == names.end() ? "token" + std::to_string(l.token) : it->second;
        for (std::uint64_t id : r.Tensors()) s += " " + Hex(address_[id]);
        return s;
      }
      case ipc::RecordType::kCopy: {
        const auto c = r.As<ipc::CopyRecord>();
        return "copy " + (c.src ? Hex(address_[c.src]) : "0") + " " +
               (c.dst ? Hex(address_[c.dst]) : "0") + " " + std::to_string(c.bytes);
      }
      case ipc::RecordType::kMemset: {
        const auto m = r.As<ipc::MemsetRecord>();
        return "memset " + Hex(address_[m.dst]) + " " + std::to_string(m.bytes);
      }
      case ipc::RecordType::kSync:
        return "sync";
      default:
        return "";
    }
  }

 private:
  std::map<std::uint64_t, std::uint64_t> address_;
};

std::vector<std::string> DescribeAll(const std::vector<Record>& records, FakeClient* client,
                                     Describer* d) {
  std::vector<std::string> out;
  for (const Record& r : records) {
    const std::string s = d->Describe(r, client->names);
    if (!s.empty()) out.push_back(s);
  }
  return out;
}

std::uint32_t TokenOf(const FakeClient& c, const std::string& name) {
  for (const auto& [token, n] : c.names) {
    if (n == name) return token;
  }
  return 0;
}

TEST(ShimSegmentTest, DaemonSeesExactOpsMarksAndOneDetailedIteration) {
  FakeDaemon daemon;
  const std::string socket = SocketPath("ops");
  ASSERT_TRUE(daemon.Start(socket));
  ChildProcess child;
  ASSERT_TRUE(child.Start({CHAMELEON_WORKLOAD_PROG, "ops", "5"}, ShimEnv(socket)));
  std::vector<std::string> lines;
  ASSERT_TRUE(child.ReadUntil("phase", &lines, 30000));
  ASSERT_TRUE(daemon.WaitForClients(1, 1000));
  FakeClient* client = daemon.client(0);
  EXPECT_EQ(client->creds.pid, child.pid());
  ASSERT_GE(client->hello.devices.size(), 1u);
  EXPECT_GT(client->hello.devices[0].total_memory, 0u);

  // Iteration 1, exactly as the workload logged it.
  Describer describer;
  std::vector<Record> first = client->Drain();
  EXPECT_EQ(DescribeAll(first, client, &describer), EventLines(lines));

  // Publish a boundary signature (axpy, scale) and ask for one detailed iteration.
  const std::uint32_t axpy = TokenOf(*client, "axpy");
  const std::uint32_t scale = TokenOf(*client, "scale");
  ASSERT_GE(axpy, ipc::kFirstKernelToken);
  ASSERT_GE(scale, ipc::kFirstKernelToken);
  ipc::Policy policy;
  policy.summary.generation = 1;
  policy.boundary = {axpy, scale};
  std::vector<std::uint8_t> blob;
  ipc::EncodePolicy(policy, &blob);
  ASSERT_EQ(client->mailbox.Publish(blob), ipc::PublishResult::kOk);
  ipc::SegmentHeader* header = client->segment.header();
  header->detail_request_seq.store(1);
  header->control_flags.store(ipc::kControlDetailedIteration);
  ASSERT_TRUE(child.WriteLine("go"));
  const int rc = child.Wait(30000);
  std::vector<std::string> rest = child.RemainingLines();
  ASSERT_EQ(rc, 0) << (rest.empty() ? "" : rest.back());

  std::vector<Record> records = client->Drain();
  EXPECT_EQ(DescribeAll(records, client, &describer), EventLines(rest));

  // Marks: one per iteration after the policy (iterations 2..5), numbered from 1; a full
  // iteration holds 6 ops; the captured (axpy, scale) pair is not an iteration.
  std::vector<std::size_t> marks;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].type == ipc::RecordType::kIterationMark) marks.push_back(i);
  }
  ASSERT_EQ(marks.size(), 4u);
  for (std::size_t k = 0; k < marks.size(); ++k) {
    const auto mark = records[marks[k]].As<ipc::IterationMarkRecord>();
    EXPECT_EQ(mark.iteration, k + 1);
    EXPECT_GT(mark.host_time_ns, 0u);
    if (k > 0) {
      EXPECT_EQ(mark.ops, 6u);
    }
  }
  // The detailed iteration: everything between the first and second mark is flagged, and every
  // op is followed by a MemInfo record; nothing after the second mark is flagged.
  int ops = 0;
  int mem_infos = 0;
  for (std::size_t i = marks[0] + 1; i < marks[1]; ++i) {
    EXPECT_TRUE(records[i].flags & ipc::kFlagDetailed) << "record " << i;
    const auto t = records[i].type;
    if (t == ipc::RecordType::kLaunch || t == ipc::RecordType::kCopy ||
        t == ipc::RecordType::kMemset) {
      ++ops;
      ASSERT_LT(i + 1, records.size());
      EXPECT_EQ(records[i + 1].type, ipc::RecordType::kMemInfo);
    }
    if (t == ipc::RecordType::kMemInfo) ++mem_infos;
  }
  EXPECT_EQ(ops, 6);
  EXPECT_EQ(mem_infos, 6);
  for (std::size_t i = marks[1]; i < records.size(); ++i) {
    EXPECT_FALSE(records[i].flags & ipc::kFlagDetailed) << "record " << i;
  }
  // Stable tokens: every launch of a kernel, in every iteration, carries that kernel's one token.
  std::map<std::uint32_t, std::size_t> launches_per_token;
  for (const Record& r : first) {
    if (r.type == ipc::RecordType::kLaunch) ++launches_per_token[r.As<ipc::LaunchRecord>().token];
  }
  for (const Record& r : records) {
    if (r.type == ipc::RecordType::kLaunch) ++launches_per_token[r.As<ipc::LaunchRecord>().token];
  }
  EXPECT_EQ(launches_per_token[axpy], 5u + 1u);  // once per iteration + once captured
  EXPECT_EQ(launches_per_token[scale], 5u + 1u);
  EXPECT_EQ(launches_per_token[TokenOf(*client, "sum3")], 5u);
  EXPECT_EQ(launches_per_token.size(), 4u);  // axpy, scale, sum3 and the graph launch
  EXPECT_EQ(header->detail_done_seq.load(), 1u);
  EXPECT_EQ(header->policy_generation_applied.load(), 1u);
  EXPECT_EQ(header->records_dropped.load(), 0u);
}

TEST(ShimSegmentTest, DaemonAppearingLaterLearnsLiveAllocationsThenOps) {
  const std::string socket = SocketPath("later");
  ChildProcess child;
  ASSERT_TRUE(child.Start({CHAMELEON_WORKLOAD_PROG, "later"}, ShimEnv(socket)));
  std::vector<std::string> before;
  ASSERT_TRUE(child.ReadUntil("ready", &before, 30000));
  FakeDaemon daemon;
  ASSERT_TRUE(daemon.Start(socket));
  ASSERT_TRUE(daemon.WaitForClients(1, 10000));
  ASSERT_TRUE(child.WriteLine("go"));
  ASSERT_EQ(child.Wait(30000), 0);
  std::vector<std::string> after = child.RemainingLines();
  FakeClient* client = daemon.client(0);
  Describer describer;
  std::vector<std::string> expected = EventLines(before);
  for (const std::string& l : EventLines(after)) expected.push_back(l);
  EXPECT_EQ(DescribeAll(client->Drain(), client, &describer), expected);
}

TEST(ShimSegmentTest, ForkChildDetachesAndReRegistersAsNewClient) {
  FakeDaemon daemon;
  const std::string socket = SocketPath("fork");
  ASSERT_TRUE(daemon.Start(socket));
  ChildProcess child;
  auto env = ShimEnv(socket);
  env["CHAMELEON_REAL_LIBCUDA"] = CHAMELEON_NULL_DRIVER;
  ASSERT_TRUE(child.Start({CHAMELEON_FORK_PROG}, env));
  ASSERT_EQ(child.Wait(30000), 0);
  const std::vector<std::string> lines = child.RemainingLines();
  int fork_pid = -1;
  bool saw_detached = false;
  bool saw_reregistered = false;
  std::vector<std::string> parent_lines;
  for (const std::string& l : lines) {
    unsigned long long connected = 9, live = 9;
    int alloc_rc = -1;
    if (std::sscanf(l.c_str(), "forkchild pid=%d connected=%llu live=%llu", &fork_pid, &connected,
                    &live) == 3) {
      saw_detached = connected == 0 && live == 0;
    } else if (std::sscanf(l.c_str(), "forkchild alloc=%d connected=%llu", &alloc_rc, &connected) ==
               2) {
      saw_reregistered = alloc_rc == 0 && connected == 1;
    } else {
      parent_lines.push_back(l);
    }
  }
  EXPECT_TRUE(saw_detached);
  EXPECT_TRUE(saw_reregistered);
  ASSERT_TRUE(daemon.WaitForClients(2, 1000));
  EXPECT_EQ(daemon.client(1)->creds.pid, fork_pid);
  // The parent's stream is intact: exactly its own events, none from the child; the child's
  // allocation went to its own segment.
  Describer describer;
  FakeClient* parent = daemon.client(0);
  EXPECT_EQ(DescribeAll(parent->Drain(), parent, &describer), EventLines(parent_lines));
  FakeClient* forked = daemon.client(1);
  Describer forked_describer;
  const auto forked_events = DescribeAll(forked->Drain(), forked, &forked_describer);
  ASSERT_EQ(forked_events.size(), 2u);
  EXPECT_EQ(forked_events[0].rfind("alloc ", 0), 0u);
  EXPECT_EQ(forked_events[0].substr(forked_events[0].rfind(' ')), " 4096");
}

TEST(ShimSegmentTest, TensorsComeFromKernelParamsBuffersAndLaunchEx) {
  FakeDaemon daemon;
  const std::string socket = SocketPath("forms");
  ASSERT_TRUE(daemon.Start(socket));
  std::vector<std::string> lines;
  ASSERT_EQ(
      RunToCompletion({CHAMELEON_WORKLOAD_PROG, "launchforms"}, ShimEnv(socket), &lines, 30000), 0);
  ASSERT_TRUE(daemon.WaitForClients(1, 1000));
  FakeClient* client = daemon.client(0);
  Describer describer;
  EXPECT_EQ(DescribeAll(client->Drain(), client, &describer), EventLines(lines));
}

TEST(ShimSegmentTest, AfterTheDaemonGoesAwayTheShimReconnectsAndReannounces) {
  FakeDaemon daemon;
  const std::string socket = SocketPath("reconnect");
  ASSERT_TRUE(daemon.Start(socket));
  ChildProcess child;
  ASSERT_TRUE(child.Start({CHAMELEON_WORKLOAD_PROG, "reconnect"}, ShimEnv(socket)));
  std::vector<std::string> lines;
  ASSERT_TRUE(child.ReadUntil("phase", &lines, 30000));
  ASSERT_TRUE(daemon.WaitForClients(1, 1000));
  Describer first_describer;
  FakeClient* first = daemon.client(0);
  const auto before = DescribeAll(first->Drain(), first, &first_describer);
  EXPECT_EQ(before, EventLines(lines));
  daemon.Disconnect(0);
  ASSERT_TRUE(daemon.WaitForClients(2, 10000));
  ASSERT_TRUE(child.WriteLine("go"));
  ASSERT_EQ(child.Wait(30000), 0);
  std::vector<std::string> after = child.RemainingLines();
  // The new connection first learns the live allocation, then the ops that follow.
  std::vector<std::string> expected = EventLines(lines);
  for (const std::string& l : EventLines(after)) expected.push_back(l);
  FakeClient* second = daemon.client(1);
  std::vector<Record> records = second->Drain();
  Describer describer;
  EXPECT_EQ(DescribeAll(records, second, &describer), expected);
  // Same allocation id on both connections: ids are per process, not per connection.
  ASSERT_FALSE(records.empty());
  ASSERT_EQ(records[0].type, ipc::RecordType::kAlloc);
  EXPECT_EQ(records[0].As<ipc::AllocRecord>().id, 1u);
}

TEST(ShimSegmentTest, DisabledByDaemonRecordsNoOpsButKeepsAllocationsInStep) {
  FakeDaemon daemon;
  const std::string socket = SocketPath("disable");
  ASSERT_TRUE(daemon.Start(socket));
  ChildProcess child;
  ASSERT_TRUE(child.Start({CHAMELEON_WORKLOAD_PROG, "disable"}, ShimEnv(socket)));
  std::vector<std::string> lines;
  ASSERT_TRUE(child.ReadUntil("phase", &lines, 30000));
  ASSERT_TRUE(daemon.WaitForClients(1, 1000));
  FakeClient* client = daemon.client(0);
  ipc::SegmentHeader* header = client->segment.header();
  header->control_flags.store(ipc::kControlDisabled);
  ASSERT_TRUE(child.WriteLine("go"));
  ASSERT_TRUE(child.ReadUntil("phase2", &lines, 30000));
  header->control_flags.store(0);
  ASSERT_TRUE(child.WriteLine("go"));
  ASSERT_EQ(child.Wait(30000), 0);
  for (const std::string& l : child.RemainingLines()) lines.push_back(l);
  // "unrecorded scale" (issued while disabled) is not an event line: it must not appear.
  Describer describer;
  EXPECT_EQ(DescribeAll(client->Drain(), client, &describer), EventLines(lines));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "done"), lines.end());
}

}  // namespace
}  // namespace shim_test
