// A chameleond running on a thread of the test process, on a private socket and a free metrics
// port, with helpers to query it through the control protocol.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "chameleon/control/control_client.h"
#include "chameleon/daemon/daemon.h"
#include "fake_client.h"
#include "support/wait_for.h"
#include "synthetic_stream.h"

namespace chameleon::daemon::testing {

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/chameleond-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    chmod(dir, 0755);  // other uids connect in the permission test
    options_.socket_path = dir_ + "/d.sock";
    options_.metrics_listen = "127.0.0.1:0";
    options_.drain_interval_ms = 1;
    options_.housekeeping_interval_ms = 20;
    Configure(&options_);
  }
  /// Tests adjust the options before the daemon starts.
  virtual void Configure(DaemonOptions*) {}

  void StartDaemon() {
    daemon_ = std::make_unique<Daemon>(options_);
    daemon_->Start();
    thread_ = std::thread([this] { run_result_ = daemon_->Run(); });
  }

  void TearDown() override {
    if (daemon_) {
      daemon_->Stop();
      thread_.join();
      EXPECT_EQ(run_result_, 0);
      daemon_.reset();
    }
    std::filesystem::remove_all(dir_);
  }

  nlohmann::json Control(nlohmann::json request) {
    return control::ControlRequest(options_.socket_path, request);
  }
  nlohmann::json Describe(std::uint32_t id) {
    return Control({{"command", "client"}, {"id", id}})["client"];
  }
  std::uint64_t BadInput(const std::string& reason) {
    return Control({{"command", "status"}})["daemon"]["bad_input"][reason].get<std::uint64_t>();
  }

  /// Polls `done` until it holds or the deadline passes (support/wait_for.h).
  static bool WaitFor(const std::function<bool()>& done, int timeout_ms = 10000) {
    return test_support::WaitFor(done, std::chrono::milliseconds(timeout_ms));
  }
  /// Waits until the daemon has drained everything `client` pushed.
  bool WaitDrained(FakeClient& client) {
    return WaitFor([&] {
      client.Heartbeat();
      auto d = Describe(client.id());
      return d.is_object() && d["records"]["drained"].get<std::uint64_t>() >= client.pushed();
    });
  }
  /// Takes `client` through its detailed iteration with layout-1.1 marks: steps 0-5, boundary 1,
  /// the detailed step 6, boundary 2, the detail marked done. Marks carry no device time yet.
  /// Returns the generation in force. Defined below PushSteps and PushDetailedStep.
  std::uint64_t RecordDetailedIteration(FakeClient& client, const LoopSpec& spec);
  std::unique_ptr<FakeClient> Connect(std::uint64_t device_memory = 1ull << 30) {
    std::string error;
    auto client = FakeClient::Connect(options_.socket_path, &error, device_memory);
    EXPECT_NE(client, nullptr) << error;
    return client;
  }

  /// Pushes steps [from, to) of `spec`'s loop as launches (names for every kernel token first).
  static void PushSteps(FakeClient& client, const LoopSpec& spec, int from, int to) {
    for (int step = from; step < to; ++step) {
      for (std::uint32_t token : StepOps(spec, step)) ASSERT_TRUE(client.Launch(token));
      client.Heartbeat();
    }
  }

  DaemonOptions options_;
  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
  int run_result_ = -1;
};

/// Pushes one step recorded in detailed mode: the first half of the ops each allocate a `bytes`
/// activation that the second half reads back and frees (a forward and a backward pass), on top
/// of a 1 MiB weight; memory after each op. Activation ids are 1000 + 1000 · step + i: fresh in
/// every step, as a program that allocates afresh each iteration.
inline void PushDetailedStep(FakeClient& client, const LoopSpec& spec, int step,
                             std::uint64_t bytes = 256 << 10) {
  std::uint64_t live = 1 << 20;
  std::uint64_t next_id = 1000 + std::uint64_t(step) * 1000;
  std::vector<std::uint64_t> activations;
  const auto ops = StepOps(spec, step);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::vector<std::uint64_t> tensors{1};  // the weights, live before the iteration
    if (i < ops.size() / 2) {
      ASSERT_TRUE(client.Alloc(next_id, bytes, ipc::kFlagDetailed));
      live += bytes;
      activations.push_back(next_id);
      tensors.push_back(next_id++);
    } else if (!activations.empty()) {
      tensors.push_back(activations.back());
    }
    ASSERT_TRUE(client.Launch(ops[i], tensors, ipc::kFlagDetailed));
    if (i >= ops.size() / 2 && !activations.empty()) {
      ASSERT_TRUE(client.Free(activations.back(), ipc::kFlagDetailed));
      activations.pop_back();
      live -= bytes;
    }
    ASSERT_TRUE(client.MemInfo(live));
  }
}

inline std::uint64_t DaemonTest::RecordDetailedIteration(FakeClient& client, const LoopSpec& spec) {
  PushSteps(client, spec, 0, 6);
  EXPECT_TRUE(WaitFor([&] { return client.DetailedRequested(); }));
  const std::uint64_t generation = Describe(client.id())["generation"].get<std::uint64_t>();
  EXPECT_TRUE(client.MarkTimed(1, generation, 0, 0));
  PushDetailedStep(client, spec, 6);
  EXPECT_TRUE(client.MarkTimed(2, generation, 0, 0));
  client.header()->detail_done_seq.store(client.header()->detail_request_seq.load());
  return generation;
}

}  // namespace chameleon::daemon::testing
