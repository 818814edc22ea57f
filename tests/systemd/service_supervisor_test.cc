// SIGHUP reloads and earned watchdog pings: a valid reload reaches the apply hook, an invalid
// one keeps the running configuration, and WATCHDOG=1 is sent only while the loop answers.
// Each TEST runs in its own process, so blocking SIGHUP and setting NOTIFY_SOCKET are safe.
#include "chameleon/daemon/service_supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "support/wait_for.h"

namespace chameleon::daemon {
namespace {

using std::chrono::milliseconds;

using test_support::WaitFor;

class SupervisorTest : public testing::Test {
 protected:
  void SetUp() override {
    ServiceSupervisor::BlockServiceSignals();  // before any thread exists
    path_ = "/tmp/chameleon-supervisor-" + std::to_string(getpid()) + ".yaml";
    Write("detection: {stage_m: 2}\n");
  }
  void TearDown() override { unlink(path_.c_str()); }
  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::vector<std::string> Args() const { return {"--config", path_}; }

  std::string path_;
};

TEST_F(SupervisorTest, SighupAppliesAValidFile) {
  std::atomic<int> applied_m{-1};
  ServiceSupervisor::Hooks hooks;
  hooks.loop_alive = [] { return true; };
  hooks.apply = [&](const ServiceConfig& c) { applied_m = c.daemon.detection.stage_m; };
  ServiceSupervisor supervisor(Args(), ServiceConfig{}, hooks, "/nonexistent");
  ASSERT_TRUE(supervisor.Start());
  Write("detection: {stage_m: 6}\n");
  ASSERT_EQ(kill(getpid(), SIGHUP), 0);
  ASSERT_TRUE(WaitFor([&] { return supervisor.reloads_applied() == 1; }, milliseconds(5000)));
  EXPECT_EQ(applied_m.load(), 6);
  EXPECT_EQ(supervisor.config().daemon.detection.stage_m, 6);
  supervisor.Stop();
}

TEST_F(SupervisorTest, SighupWithAnInvalidFileKeepsTheRunningConfiguration) {
  std::atomic<int> applies{0};
  ServiceSupervisor::Hooks hooks;
  hooks.loop_alive = [] { return true; };
  hooks.apply = [&](const ServiceConfig&) { ++applies; };
  ServiceConfig running;
  running.daemon.detection.stage_m = 4;
  ServiceSupervisor supervisor(Args(), running, hooks, "/nonexistent");
  ASSERT_TRUE(supervisor.Start());
  Write("detection: {stage_m: many}\n");
  ASSERT_EQ(kill(getpid(), SIGHUP), 0);
  ASSERT_TRUE(WaitFor([&] { return supervisor.reloads_rejected() == 1; }, milliseconds(5000)));
  EXPECT_EQ(applies.load(), 0);
  EXPECT_EQ(supervisor.config().daemon.detection.stage_m, 4);
  // The process is still alive and a later valid reload is taken.
  Write("detection: {stage_m: 3}\n");
  ASSERT_EQ(kill(getpid(), SIGHUP), 0);
  ASSERT_TRUE(WaitFor([&] { return supervisor.reloads_applied() == 1; }, milliseconds(5000)));
  EXPECT_EQ(supervisor.config().daemon.detection.stage_m, 3);
}

/// systemd's notification socket, counting WATCHDOG=1 datagrams.
class FakeSystemd {
 public:
  FakeSystemd() {
    path_ = "/tmp/chameleon-wd-" + std::to_string(getpid()) + ".sock";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    unlink(path_.c_str());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
    setenv("WATCHDOG_USEC", "100000", 1);  // ping every 50 ms
    setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  }
  ~FakeSystemd() {
    close(fd_);
    unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  std::string Receive() {
    char buf[256];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n <= 0 ? "<nothing>" : std::string(buf, static_cast<std::size_t>(n));
  }
  int DrainPings() {
    int pings = 0;
    char buf[256];
    ssize_t n;
    while ((n = recv(fd_, buf, sizeof(buf), 0)) > 0) {
      if (std::string(buf, static_cast<std::size_t>(n)) == "WATCHDOG=1") ++pings;
    }
    return pings;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST_F(SupervisorTest, WatchdogPingsOnlyWhileTheLoopAnswers) {
  FakeSystemd systemd;
  ASSERT_TRUE(systemd.bound());
  std::atomic<bool> alive{true};
  std::atomic<int> probes{0};
  ServiceSupervisor::Hooks hooks;
  hooks.loop_alive = [&] {
    ++probes;
    return alive.load();
  };
  ServiceSupervisor supervisor(Args(), ServiceConfig{}, hooks, "/nonexistent");
  ASSERT_TRUE(supervisor.Start());
  int pings = 0;
  ASSERT_TRUE(WaitFor([&] { return (pings += systemd.DrainPings()) >= 3; }, milliseconds(5000)));
  // The supervisor counts a ping just after sending it (seen under TSan: counted 2 of 3
  // received): its count catches up with what arrived, and never exceeds what was sent.
  const auto received = static_cast<std::uint64_t>(pings);
  EXPECT_TRUE(WaitFor([&] { return supervisor.watchdog_pings() >= received; }, milliseconds(5000)));
  const std::uint64_t counted = supervisor.watchdog_pings();
  const auto sent_since = static_cast<std::uint64_t>(systemd.DrainPings());  // queued meanwhile
  EXPECT_LE(counted, received + sent_since);
  // The loop hangs: probes go on, pings stop.
  alive = false;
  const std::uint64_t pings_at_hang = supervisor.watchdog_pings();
  const int probes_at_hang = probes.load();
  ASSERT_TRUE(WaitFor([&] { return probes.load() >= probes_at_hang + 3; }, milliseconds(5000)));
  EXPECT_LE(supervisor.watchdog_pings(), pings_at_hang + 1);  // one probe may have been in flight
  supervisor.Stop();
}

TEST_F(SupervisorTest, SigtermNotifiesStoppingThenCallsStopOnce) {
  FakeSystemd systemd;
  ASSERT_TRUE(systemd.bound());
  unsetenv("WATCHDOG_USEC");
  std::atomic<int> stops{0};
  ServiceSupervisor::Hooks hooks;
  hooks.loop_alive = [] { return true; };
  hooks.stop = [&] { ++stops; };
  ServiceSupervisor supervisor(Args(), ServiceConfig{}, hooks, "/nonexistent");
  ASSERT_TRUE(supervisor.Start());
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  ASSERT_TRUE(WaitFor([&] { return stops.load() == 1; }, milliseconds(5000)));
  EXPECT_TRUE(supervisor.stop_requested());
  EXPECT_EQ(systemd.Receive(), "STOPPING=1");
  ASSERT_EQ(kill(getpid(), SIGINT), 0);  // a second request is absorbed
  supervisor.Stop();
  EXPECT_EQ(stops.load(), 1);
}

}  // namespace
}  // namespace chameleon::daemon
