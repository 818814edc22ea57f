// Issue 16, the two-process lease case end to end: two trainers on two devices of one simulated
// node (SIMGPU_MACHINE=h200-sxm, SIMGPU_DEVICES=2, one SIMGPU_NODE ledger, so each device's
// capacity is shared by both processes as on a real node), both under the shim, one chameleond.
// Trainer A runs on node device 0 under a limit below its peak and sees both devices; trainer B
// runs on node device 1 (CUDA_VISIBLE_DEVICES=1) with room to spare. The daemon, whose config
// opts device 1 in for lending, leases B's spare HBM to A; A's swapped bytes go to device 1.
// Then B grows (--grow-file): its shim asks for the memory back, A moves the leased bytes to host
// memory, the revocation completes and B's limit comes back. A second test stops A (SIGSTOP)
// while it holds the lease: B is never blocked, the daemon declares the lease hung, stops lending
// on that GPU and says so. Every wait polls a structured condition (chameleonctl JSON, the
// Prometheus text, the shims' stats files, the trainers' stdout) with a deadline; the trainers
// are steered by files only (docs/trainer.md "Hooks for multi-process tests").
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>

#include "stats_file_reader.h"
#include "swap_e2e_fixture.h"

namespace chameleon::daemon::testing {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
/// Each node device's capacity (SIMGPU_MEMORY): small, so that B's growth needs what was lent.
constexpr std::uint64_t kDeviceBytes = 256 * kMiB;
/// Kept free on the lent GPU beyond B's peak (lending.reserve).
constexpr std::uint64_t kReserveBytes = 8 * kMiB;
/// B's growth: its pass-through tensors (< 1 MiB) and this come within kReserveBytes / 2 of the
/// device, so B needs back any lease of more than about 4 MiB, and fits once it has it back.
constexpr std::uint64_t kGrowBytes = kDeviceBytes - kReserveBytes / 2;
/// A lease B's growth needs back: more than the device less the growth and B's own tensors.
constexpr std::uint64_t kNeededLeaseBytes = kDeviceBytes - kGrowBytes + kMiB;
/// Node device 1's PCI bus id (docs/simgpu.md: 0000:<0x18 + node index>:00.0).
const char* const kLentGpu = "0000:19:00.0";
/// Trainer A: the small trainer of the swap tests, swapping at 3/4 of its peak.
const std::vector<std::string> kTrainerA = kSmallTrainer;
/// Trainer B: a quarter of A's work per step; its tensors are below the shim's 2 MiB default
/// minimum, so they pass through and only its growth is the executor's.
const std::vector<std::string> kTrainerB{"--layers", "1",       "--hidden", "64",     "--seq",
                                         "128",      "--batch", "8",        "--seed", "2"};
constexpr int kMaxSteps = 100000;  // the runs end by their stop files
constexpr int kDeadlineMs = 90000;

/// A `name{labels} value` sample of the Prometheus text, or -1 when absent.
double Sample(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  for (std::size_t at = 0; (at = text.find(prefix, at)) != std::string::npos; at += prefix.size()) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + prefix.size()));
  }
  return -1;
}

int StepLines(const std::string& out) { return static_cast<int>(ResultLines(out).size()); }

class TwoProcessTest : public SwapE2ETest {
 protected:
  void SetUp() override {
    SwapE2ETest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(test_support::RequiredFile(ctl_, "chameleonctl (target chameleonctl)"));
    node_ = std::filesystem::path(dir_).filename().string();
  }
  void TearDown() override {
    for (Child* c : {&a_, &b_}) {
      int status = 0;
      if (c->pid > 0 && !Exited(*c, &status)) {
        kill(c->pid, SIGCONT);
        kill(c->pid, SIGKILL);
        Wait(*c);
      }
    }
    SwapE2ETest::TearDown();
    std::filesystem::remove("/dev/shm/simgpu-node-" + node_ + "-" + std::to_string(getuid()));
  }

  /// chameleond with lending on node device 1 only; a lessee that has not moved revoked bytes
  /// home after `deadline_ms` is hung. The heartbeat timeout is long, so that a stopped lessee
  /// stays a client (hung), not a dead one (whose leases are simply freed).
  void StartNodeDaemon(int deadline_ms) {
    const std::string config = dir_ + "/chameleond.yaml";
    std::ofstream(config) << "clients:\n  heartbeat_timeout_ms: 120000\n"
                          << "detection:\n  stage_n: 8\n"
                          << "lending:\n  placement: node\n  gpus: [\"" << kLentGpu << "\"]\n"
                          << "  reserve: " << kReserveBytes << "\n"
                          << "  revoke_deadline_ms: " << deadline_ms << "\n";
    // NVLink-class peers and one host NUMA node, whatever this machine's sysfs says: the peer is
    // the nearest helper (the operator's override, docs/topology.md).
    const std::string topology = dir_ + "/node.yaml";
    std::ofstream(topology) << "peer_link_bandwidth: 3.7e11\nhost_numa_bytes: [64GiB]\n";
    const std::string log = dir_ + "/chameleond";
    daemon_ = Spawn({chameleond_, "--config", config, "--socket", socket_, "--metrics-listen",
                     "127.0.0.1:0", "--log-level", "debug"},
                    {"CHAMELEON_TOPOLOGY=" + topology}, log + ".out", log + ".err");
    ASSERT_GT(daemon_.pid, 0);
    ASSERT_TRUE(WaitFor([&] {
      return Control({{"command", "status"}}).value("ok", false);
    })) << ReadFile(log + ".err");
  }

  /// The node's environment for a trainer under the shim named `name`.
  std::vector<std::string> NodeEnv(const std::string& name) const {
    return {"LD_LIBRARY_PATH=" + simgpu_dir_,
            "LD_PRELOAD=" + shim_,
            "CHAMELEON_SOCKET=" + socket_,
            "SIMGPU_MACHINE=h200-sxm",
            "SIMGPU_DEVICES=2",
            "SIMGPU_NODE=" + node_,
            "SIMGPU_MEMORY=" + std::to_string(kDeviceBytes),
            "CHAMELEON_STATS_FILE=" + StatsFile(name),
            "CHAMELEON_LOG_LEVEL=debug",
            "CHAMELEON_LOG_FILE=" + dir_ + "/" + name + ".shim.log",
            "CHAMELEON_RETRY_MS=50",
            "CHAMELEON_CONNECT_TIMEOUT_MS=2000"};
  }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  static void Touch(const std::string& path) { std::ofstream(path) << "1\n"; }

  /// A's peak alone, without the shim (any number of steps has the same peak).
  std::uint64_t PeakOfA() {
    std::vector<std::string> args = kTrainerA;
    args.insert(args.end(), {"--steps", "1"});
    const RunOutput plain = Run("peak", args, PlainEnv());
    return Number(plain.out, "peak");
  }

  /// Starts B, then A once the daemon knows B; returns when A holds a lease on B's GPU large
  /// enough for B's growth to need it back (leases grow with A's later candidates) and has
  /// swapped bytes out to it (A's stats file). `lease` gets chameleonctl's description of it.
  void StartBothAndLend(nlohmann::json* lease) {
    const std::uint64_t peak = PeakOfA();
    ASSERT_GT(peak, 0u);
    std::vector<std::string> b_args = kTrainerB;
    b_args.insert(b_args.end(),
                  {"--steps", std::to_string(kMaxSteps), "--stop-file", File("stop-b"),
                   "--grow-file", File("grow-b"), "--grow-bytes", std::to_string(kGrowBytes)});
    std::vector<std::string> b_env = NodeEnv("b");
    b_env.push_back("CUDA_VISIBLE_DEVICES=1");
    b_ = Start("b", b_args, b_env);
    ASSERT_TRUE(WaitFor([&] { return ClientId(b_.pid) != 0; }, kDeadlineMs)) << Err(b_);
    std::vector<std::string> a_args = kTrainerA;
    a_args.insert(a_args.end(),
                  {"--steps", std::to_string(kMaxSteps), "--stop-file", File("stop-a")});
    std::vector<std::string> a_env = NodeEnv("a");
    a_env.insert(a_env.end(), {"CHAMELEON_DEVICE_LIMIT=" + std::to_string(peak * 3 / 4),
                               "CHAMELEON_SWAP_MIN_BYTES=64KiB"});
    a_ = Start("a", a_args, a_env);
    ASSERT_TRUE(WaitFor([&] { return ClientId(a_.pid) != 0; }, kDeadlineMs)) << Err(a_);
    a_id_ = ClientId(a_.pid);
    b_id_ = ClientId(b_.pid);
    ASSERT_TRUE(WaitFor(
        [&] {
          const auto shown = Leases()["leases"];
          return Running() && Total("a", "peer_out_bytes") > 0 && shown.size() == 1 &&
                 shown[0]["bytes"].get<std::uint64_t>() > kNeededLeaseBytes;
        },
        kDeadlineMs))
        << "no lease used; leases: " << Leases().dump(2) << "\nA: " << Err(a_)
        << "\nB: " << Err(b_);
    *lease = Leases()["leases"][0];
  }

  /// Both trainers still running (a failed one would otherwise be waited on until the deadline).
  bool Running() {
    for (Child* c : {&a_, &b_}) {
      int status = 0;
      if (c->pid > 0 && Exited(*c, &status)) {
        ADD_FAILURE() << c->out_path << " exited early with status " << status << ": " << Err(*c);
        c->pid = -1;
      }
    }
    return a_.pid > 0 && b_.pid > 0;
  }
  std::string Err(const Child& c) const { return ReadFile(c.err_path).substr(0, 3000); }

  /// The daemon's client id of `pid`, 0 while it has none.
  std::uint32_t ClientId(pid_t pid) {
    const auto clients = Control({{"command", "clients"}});
    if (!clients.value("ok", false)) return 0;
    for (const auto& c : clients["clients"]) {
      if (c["pid"] == pid) return c["id"].get<std::uint32_t>();
    }
    return 0;
  }

  /// The daemon's description of client `id` (chameleonctl client ID --json).
  nlohmann::json Describe(std::uint32_t id) {
    return Control({{"command", "client"}, {"id", id}})["client"];
  }

  /// chameleonctl itself (the operator's view), its stdout.
  std::string Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv{"--socket", socket_};
    argv.insert(argv.end(), args.begin(), args.end());
    const RunOutput r = Run("ctl", argv, {}, ctl_);
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.err;
    return r.out;
  }
  nlohmann::json Leases() {
    return nlohmann::json::parse(Ctl({"--json", "leases"}), nullptr, false);
  }
  std::string Metrics() { return Ctl({"metrics"}); }

  /// The latest cumulative value of executor counter `counter` in the shim's stats file of run
  /// `name` (its last whole iteration or exit record), 0 before any.
  std::uint64_t Total(const std::string& name, const std::string& counter) const {
    const auto records = shim::testing::ReadStatsFile(StatsFile(name));
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      if (it->event == "malformed") continue;  // a line being written
      const auto found = it->totals.find(counter);
      return found != it->totals.end() ? found->second : 0;
    }
    return 0;
  }
  /// The device limit in force in the shim of run `name` at its latest record, 0 before any.
  std::uint64_t LimitInForce(const std::string& name) const {
    const auto records = shim::testing::ReadStatsFile(StatsFile(name));
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      if (it->event != "malformed") return it->limit;
    }
    return 0;
  }

  /// Stops both runs by their files and waits for them; returns their outputs.
  void StopBoth(RunOutput* a, RunOutput* b) {
    Touch(File("stop-a"));
    Touch(File("stop-b"));
    *a = Finish(a_);
    *b = Finish(b_);
    a_.pid = b_.pid = -1;
  }

  /// A printed exactly what an unlimited run of as many steps prints (no shim, 4 TB devices).
  void ExpectAMatchesItsUnlimitedRun(const RunOutput& a) {
    ASSERT_TRUE(WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0) << a.err.substr(0, 4000);
    const int steps = StepLines(a.out);
    ASSERT_GT(steps, 0);
    std::vector<std::string> args = kTrainerA;
    args.insert(args.end(), {"--steps", std::to_string(steps)});
    std::vector<std::string> env = PlainEnv();
    env.insert(env.end(), {"SIMGPU_MACHINE=h200-sxm", "SIMGPU_MEMORY=4T"});
    ExpectIdentical(a, Run("plain", args, env));
  }

  std::string ctl_ = CHAMELEON_E2E_CTL;
  std::string node_;
  Child a_, b_;
  std::uint32_t a_id_ = 0, b_id_ = 0;
};

TEST_F(TwoProcessTest, TheOwnersSpareIsLentAndGivenBackWhenItGrows) {
  ASSERT_NO_FATAL_FAILURE(StartNodeDaemon(/*deadline_ms=*/20000));
  nlohmann::json lease;
  ASSERT_NO_FATAL_FAILURE(StartBothAndLend(&lease));
  // The lease as chameleonctl shows it: B's GPU, B lends, A borrows, whole 2 MiB chunks.
  EXPECT_EQ(lease["gpu"], kLentGpu) << lease.dump();
  EXPECT_EQ(lease["owner"].get<std::uint32_t>(), b_id_);
  EXPECT_EQ(lease["lessee"].get<std::uint32_t>(), a_id_);
  EXPECT_EQ(lease["state"], "active");
  const auto bytes = lease["bytes"].get<std::uint64_t>();
  EXPECT_EQ(bytes % (2 * kMiB), 0u);
  // And in the metrics: one lease of those bytes, placed on device 1.
  const std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "chameleon_leases_active"), 1) << metrics;
  EXPECT_EQ(Sample(metrics, "chameleon_leased_bytes"), double(bytes));
  EXPECT_GT(
      Sample(metrics, std::string("chameleon_placement_bytes{helper=\"gpu ") + kLentGpu + "\"}"),
      0);
  // B runs under its limit lowered by the lease (its shim applied the daemon's; the lease may
  // still grow towards a later candidate's demand, hence the lease as it is now).
  EXPECT_TRUE(WaitFor(
      [&] {
        const auto shown = Leases()["leases"];
        return shown.size() == 1 &&
               LimitInForce("b") == kDeviceBytes - shown[0]["bytes"].get<std::uint64_t>();
      },
      kDeadlineMs))
      << LimitInForce("b") << " " << Leases().dump(2);

  // B grows: its shim asks for the memory back, A moves it home, the revocation completes.
  Touch(File("grow-b"));
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto shown = Leases();
        return Running() && shown["revocations"]["completed"] == 1 && shown["leases"].empty();
      },
      kDeadlineMs))
      << Leases().dump(2);
  EXPECT_EQ(Leases()["revocations"]["hung"], 0);
  EXPECT_EQ(Sample(Metrics(), "chameleon_lease_revocations_total{outcome=\"completed\"}"), 1);
  // B gets its memory: its limit is the whole device again, in the daemon and in its shim.
  EXPECT_TRUE(WaitFor([&] { return LimitInForce("b") == kDeviceBytes; }, kDeadlineMs))
      << LimitInForce("b");
  EXPECT_EQ(Describe(b_id_)["device"]["limit_bytes"].get<std::uint64_t>(), kDeviceBytes);
  // A's proof of the revocation is that it holds nothing on device 1 any more: copies there were
  // moved home (evacuated_bytes; none when the revocation found every copy swapped back in) and
  // idle buffers freed.
  EXPECT_TRUE(WaitFor([&] { return Total("a", "peer_held_bytes") == 0; }, kDeadlineMs));
  RecordProperty("lease_bytes", std::to_string(bytes));
  RecordProperty("evacuated_bytes", std::to_string(Total("a", "evacuated_bytes")));
  // A little more training on both sides after the revocation, then both stop.
  const int a_steps = StepLines(ReadFile(a_.out_path)), b_steps = StepLines(ReadFile(b_.out_path));
  ASSERT_TRUE(WaitFor(
      [&] {
        return Running() && StepLines(ReadFile(a_.out_path)) > a_steps + 1 &&
               StepLines(ReadFile(b_.out_path)) > b_steps + 1;
      },
      kDeadlineMs));
  RunOutput a, b;
  StopBoth(&a, &b);
  // B never ran out of memory and its grown bytes read back intact (the trainer checks them).
  EXPECT_TRUE(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0) << b.err.substr(0, 4000);
  EXPECT_NE(b.out.find("grew " + std::to_string(kGrowBytes) + " at step "), std::string::npos);
  // No data of A's was lost on device 1 or on its way home.
  ExpectAMatchesItsUnlimitedRun(a);
  const auto stats = ExecutorStats(StatsFile("a"));
  ASSERT_FALSE(stats.empty());
  EXPECT_GT(stats.at("peer_out_bytes"), 0u);
  EXPECT_EQ(stats.at("peer_held_bytes"), 0u) << "A holds nothing on device 1 any more";
}

TEST_F(TwoProcessTest, AStoppedLesseeNeverBlocksTheOwnerAndTheGpuStopsLending) {
  ASSERT_NO_FATAL_FAILURE(StartNodeDaemon(/*deadline_ms=*/1000));
  nlohmann::json lease;
  ASSERT_NO_FATAL_FAILURE(StartBothAndLend(&lease));
  ASSERT_EQ(kill(a_.pid, SIGSTOP), 0);
  Touch(File("grow-b"));
  // A cannot answer: past the deadline the lease is declared hung and the GPU stops lending.
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto shown = Leases();
        if (shown["revocations"]["hung"] != 1 || !shown["leases"].empty()) return false;
        // A's own GPU may have a row of its own (a round before A overflowed saw it lendable).
        for (const auto& row : shown["gpus"]) {
          if (row["gpu"] == kLentGpu) return row["state"] == "stopped";
        }
        return false;
      },
      kDeadlineMs))
      << Leases().dump(2);
  const std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "chameleon_lease_revocations_total{outcome=\"hung\"}"), 1) << metrics;
  EXPECT_EQ(Sample(metrics, "chameleon_lending_stopped_gpus"), 1);
  EXPECT_EQ(Sample(metrics, "chameleon_leases_active"), 0);
  EXPECT_EQ(Leases()["revocations"]["completed"], 0);
  // B is never blocked: it grew and keeps training while A is still stopped, with its limit back.
  const int b_steps = StepLines(ReadFile(b_.out_path));
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string out = ReadFile(b_.out_path);
        return Running() && out.find("grew ") != std::string::npos && StepLines(out) > b_steps + 2;
      },
      kDeadlineMs))
      << Err(b_);
  EXPECT_EQ(Describe(b_id_)["device"]["limit_bytes"].get<std::uint64_t>(), kDeviceBytes);
  // A resumes, moves what it held on device 1 home, and loses nothing.
  ASSERT_EQ(kill(a_.pid, SIGCONT), 0);
  const int a_steps = StepLines(ReadFile(a_.out_path));
  ASSERT_TRUE(WaitFor([&] { return Running() && StepLines(ReadFile(a_.out_path)) > a_steps + 1; },
                      kDeadlineMs));
  RunOutput a, b;
  StopBoth(&a, &b);
  EXPECT_TRUE(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0) << b.err.substr(0, 4000);
  ExpectAMatchesItsUnlimitedRun(a);
  EXPECT_TRUE(Leases()["leases"].empty()) << "no lease on a GPU that stopped lending";
}

}  // namespace
}  // namespace chameleon::daemon::testing
