// The swap end-to-end fixture: a private directory, chameleond as a separate process (so a test
// can kill -9 it), and the trainer / replayer on simgpu, with or without the shim and a limit.
// Paths come from CMake (targets built in this tree; the test is registered only where they are)
// and a missing one fails the test.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "chameleon/control/control_client.h"
#include "support/required_file.h"
#include "support/wait_for.h"
#include "swap_e2e_util.h"

namespace chameleon::daemon::testing {

/// The small trainer used by most tests: 25.9 MB peak, ~0.3 s per step on a loaded 2-core VM,
/// with activations of 64 KiB to 2 MiB (hence CHAMELEON_SWAP_MIN_BYTES=64KiB below).
inline const std::vector<std::string> kSmallTrainer{
    "--layers", "2", "--hidden", "64", "--seq", "128", "--batch", "16", "--seed", "1"};

class SwapE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    using test_support::RequiredFile;
    ASSERT_TRUE(RequiredFile(shim_, "libchameleon.so (target chameleon_shim)"));
    ASSERT_TRUE(RequiredFile(simgpu_dir_ + "/libcuda.so.1", "simgpu (target chameleon_simgpu)"));
    ASSERT_TRUE(RequiredFile(trainer_, "the trainer (target chameleon-train-sim)"));
    ASSERT_TRUE(RequiredFile(replay_, "the replayer (target chameleon-replay)"));
    ASSERT_TRUE(RequiredFile(chameleond_, "chameleond (target chameleond)"));
    char dir[] = "/tmp/chameleon-swap-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/d.sock";
  }

  void TearDown() override {
    StopDaemon();
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
    if (HasFailure()) std::fprintf(stderr, "outputs kept in %s\n", dir_.c_str());
  }

  /// Starts chameleond on the test's socket with `flags`; returns once it answers `status`.
  /// `env`: "NAME=value" for the daemon (e.g. CHAMELEON_TOPOLOGY).
  void StartDaemon(const std::vector<std::string>& flags = {},
                   const std::vector<std::string>& env = {}) {
    ++daemon_runs_;
    const std::string log = dir_ + "/chameleond." + std::to_string(daemon_runs_);
    std::vector<std::string> argv{chameleond_,   "--socket",    socket_, "--metrics-listen",
                                  "127.0.0.1:0", "--log-level", "debug"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    daemon_ = Spawn(argv, env, log + ".out", log + ".err");
    ASSERT_GT(daemon_.pid, 0);
    ASSERT_TRUE(WaitFor([&] {
      return Control({{"command", "status"}}).value("ok", false);
    })) << ReadFile(log + ".err");
  }
  /// Stops the daemon with `signal` (SIGTERM: clean stop; SIGKILL: as if it crashed).
  void StopDaemon(int signal = SIGTERM) {
    if (daemon_.pid <= 0) return;
    kill(daemon_.pid, signal);
    Wait(daemon_);
    daemon_.pid = -1;
  }

  nlohmann::json Control(const nlohmann::json& request) {
    return control::ControlRequest(socket_, request);
  }
  /// The daemon's description of the client whose pid is `pid`, or null.
  nlohmann::json ClientOf(pid_t pid) {
    const auto clients = Control({{"command", "clients"}});
    if (!clients.value("ok", false)) return nullptr;
    for (const auto& c : clients["clients"]) {
      if (c["pid"] == pid) {
        const auto d = Control({{"command", "client"}, {"id", c["id"]}});
        return d.value("ok", false) ? d["client"] : nlohmann::json(nullptr);
      }
    }
    return nullptr;
  }

  /// Polls `done` until it holds or the deadline passes (support/wait_for.h).
  static bool WaitFor(const std::function<bool()>& done, int timeout_ms = 10000) {
    return test_support::WaitFor(done, std::chrono::milliseconds(timeout_ms));
  }

  /// Environment of an unlimited run: simgpu's default 80 GiB device, no shim.
  std::vector<std::string> PlainEnv() const { return {"LD_LIBRARY_PATH=" + simgpu_dir_}; }
  /// Environment of a run under the shim with a device of `limit` bytes, the same limit for the
  /// executor (so the daemon plans for it), its stats file, exit line and per-boundary log.
  std::vector<std::string> LimitedEnv(std::uint64_t limit, const std::string& name) const {
    return {"LD_LIBRARY_PATH=" + simgpu_dir_,
            "LD_PRELOAD=" + shim_,
            "CHAMELEON_SOCKET=" + socket_,
            "SIMGPU_MEMORY=" + std::to_string(limit),
            "SIMGPU_REPORT=1",
            "CHAMELEON_DEVICE_LIMIT=" + std::to_string(limit),
            "CHAMELEON_SWAP_MIN_BYTES=64KiB",
            "CHAMELEON_DEBUG=stats",
            "CHAMELEON_STATS_FILE=" + StatsFile(name),
            "CHAMELEON_LOG_LEVEL=debug",
            "CHAMELEON_LOG_FILE=" + dir_ + "/" + name + ".shim.log",
            "CHAMELEON_RETRY_MS=50",
            "CHAMELEON_CONNECT_TIMEOUT_MS=2000"};
  }

  /// Starts `program` (the trainer by default) with `args` in `env`; outputs named after `name`.
  Child Start(const std::string& name, const std::vector<std::string>& args,
              const std::vector<std::string>& env, const std::string& program = "") {
    std::vector<std::string> argv{program.empty() ? trainer_ : program};
    argv.insert(argv.end(), args.begin(), args.end());
    return Spawn(argv, env, dir_ + "/" + name + ".out", dir_ + "/" + name + ".err");
  }
  RunOutput Run(const std::string& name, const std::vector<std::string>& args,
                const std::vector<std::string>& env, const std::string& program = "") {
    return Finish(Start(name, args, env, program));
  }
  /// Runs like Run(), handing each description the daemon gives of the process (chameleonctl
  /// client's JSON) to `sample` while it runs.
  RunOutput RunSampled(const std::string& name, const std::vector<std::string>& args,
                       const std::vector<std::string>& env,
                       const std::function<void(const nlohmann::json&)>& sample) {
    const Child child = Start(name, args, env);
    bool exited = false;
    int status = 0;
    WaitFor(
        [&] {
          if (const auto d = ClientOf(child.pid); d.is_object()) sample(d);
          return exited = Exited(child, &status);
        },
        240000);
    if (!exited) status = Wait(child);
    return {status, ReadFile(child.out_path), ReadFile(child.err_path)};
  }
  std::string ShimLog(const std::string& name) const {
    return ReadFile(dir_ + "/" + name + ".shim.log");
  }
  /// The shim's CHAMELEON_STATS_FILE of the run `name` (read with ExecutorStats, Boundaries).
  std::string StatsFile(const std::string& name) const {
    return dir_ + "/" + name + ".stats.jsonl";
  }

  /// The run under a limit printed exactly the unlimited run's results.
  static void ExpectIdentical(const RunOutput& limited, const RunOutput& plain) {
    ASSERT_TRUE(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0) << plain.err;
    ASSERT_TRUE(WIFEXITED(limited.status) && WEXITSTATUS(limited.status) == 0)
        << "status " << limited.status << "\n"
        << limited.err.substr(0, 4000);
    EXPECT_FALSE(ResultLines(plain.out).empty());
    EXPECT_EQ(ResultLines(limited.out), ResultLines(plain.out));
    EXPECT_FALSE(Checksum(plain.out).empty());
    EXPECT_EQ(Checksum(limited.out), Checksum(plain.out));
    EXPECT_EQ(Number(limited.out, "peak"), Number(plain.out, "peak"));
  }

  std::string shim_ = CHAMELEON_E2E_SHIM;
  std::string simgpu_dir_ = CHAMELEON_E2E_SIMGPU_DIR;
  std::string trainer_ = CHAMELEON_E2E_TRAINER;
  std::string replay_ = CHAMELEON_E2E_REPLAY;
  std::string chameleond_ = CHAMELEON_E2E_CHAMELEOND;
  std::string dir_, socket_;
  Child daemon_;
  int daemon_runs_ = 0;
};

}  // namespace chameleon::daemon::testing
