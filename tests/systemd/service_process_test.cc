// chameleond as systemd runs it, end to end on the real Daemon: READY=1 once serving, WATCHDOG=1
// pings while the loop answers, SIGHUP with an invalid file keeps serving the same client on
// the old configuration, a valid one is applied, SIGTERM sends STOPPING=1 and exits 0 while the
// client process keeps running; --check-config and --print-config for operators.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <string>

#include "fake_client.h"
#include "process_util.h"

namespace chameleon::service_test {
namespace {

/// systemd's notification socket: collects every datagram chameleond sends.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifySocket() { close(fd_); }
  bool bound() const { return bound_; }
  /// Every message received so far, newline-separated fields kept.
  const std::string& Collect() {
    char buf[1024];
    ssize_t n;
    while ((n = recv(fd_, buf, sizeof(buf), 0)) > 0) {
      received_ += std::string(buf, static_cast<std::size_t>(n)) + "\n";
    }
    return received_;
  }
  int Count(const std::string& message) {
    Collect();
    int count = 0;
    for (std::size_t at = 0; (at = received_.find(message, at)) != std::string::npos; ++at) ++count;
    return count;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
  std::string received_;
};

class ServiceProcessTest : public testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.path() + "/chameleond.yaml";
    ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: 2}\nlog: {level: info}\n"));
  }

  /// Starts the service with NOTIFY_SOCKET and a 200 ms watchdog, like systemd would.
  void Start() {
    notify_ = std::make_unique<NotifySocket>(dir_.path() + "/notify.sock");
    ASSERT_TRUE(notify_->bound());
    std::string error;
    daemon_ = Child::Spawn(
        {CHAMELEOND_SERVICE_PATH, "--config", config_, "--socket", dir_.path() + "/c.sock",
         "--metrics-listen", "127.0.0.1:0"},
        {"NOTIFY_SOCKET=" + dir_.path() + "/notify.sock", "WATCHDOG_USEC=200000"}, &error);
    ASSERT_NE(daemon_, nullptr) << error;
    const auto port =
        daemon_->WaitForLine(std::regex(R"(metrics on http://127\.0\.0\.1:(\d+)/)"), Millis(10000));
    ASSERT_TRUE(port.has_value()) << daemon_->output();
    metrics_port_ = std::stoi((*port)[1]);
    ASSERT_TRUE(
        WaitFor([&] { return notify_->Count("READY=1") >= 1; }, Millis(10000), kPollInterval))
        << notify_->Collect() << daemon_->output();
  }

  /// chameleon_clients as the daemon reports it now (-1 when unreachable).
  int Clients() {
    const auto body = HttpGet(metrics_port_, "/metrics", Millis(2000));
    if (!body) return -1;
    const auto at = body->find("\nchameleon_clients ");
    return at == std::string::npos ? -1 : std::stoi(body->substr(at + 19));
  }

  /// chameleon_client_stage of slot 0 (0 WARMUP, 1 GEN_POLICY, 2 STABLE; -1 when not reported).
  int Stage() {
    const auto body = HttpGet(metrics_port_, "/metrics", Millis(2000));
    if (!body) return -1;
    std::smatch m;
    static const std::regex kStage(R"(\nchameleon_client_stage\{client="0"\} (-?[0-9]+))");
    return std::regex_search(*body, m, kStage) ? std::stoi(m[1]) : -1;
  }

  TempDir dir_{"chameleon-svc"};
  std::string config_;
  std::unique_ptr<NotifySocket> notify_;
  std::unique_ptr<Child> daemon_;
  int metrics_port_ = 0;
};

TEST_F(ServiceProcessTest, NotifiesReadyAndEarnsWatchdogPings) {
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_NE(notify_->Collect().find("STATUS=serving " + dir_.path() + "/c.sock"),
            std::string::npos);
  // WATCHDOG_USEC=200000: a ping every 100 ms, each after the loop answered a status request.
  EXPECT_TRUE(
      WaitFor([&] { return notify_->Count("WATCHDOG=1") >= 3; }, Millis(10000), kPollInterval))
      << notify_->Collect();
}

TEST_F(ServiceProcessTest, InvalidReloadKeepsServingTheSameClient) {
  ASSERT_NO_FATAL_FAILURE(Start());
  std::string error;
  auto client = FakeClient::Connect(dir_.path() + "/c.sock", 23, 8ull << 30, &error);
  ASSERT_NE(client, nullptr) << error;
  ASSERT_TRUE(WaitFor([&] { return Clients() == 1; }, Millis(10000), kPollInterval));

  ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: lots}\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP));
  ASSERT_TRUE(daemon_->WaitForLine(std::regex("reload rejected"), Millis(10000)))
      << daemon_->output();
  ASSERT_TRUE(daemon_->WaitForLine(
      std::regex(R"(detection\.stage_m: expected an integer in \[0, 1000\], got 'lots')"),
      Millis(5000)))
      << daemon_->output();
  EXPECT_TRUE(daemon_->running());
  EXPECT_EQ(Clients(), 1);  // still serving the same client, never dropped it

  ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: 2}\nlog: {level: debug}\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP));
  ASSERT_TRUE(daemon_->WaitForLine(std::regex("configuration reloaded"), Millis(10000)))
      << daemon_->output();
  EXPECT_EQ(Clients(), 1);
  EXPECT_GE(notify_->Count("RELOADING=1"), 2);
}

TEST_F(ServiceProcessTest, ReloadWithALowerStageNMovesTheServedClientToStable) {
  ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: 2, stage_n: 1000}\n"));
  ASSERT_NO_FATAL_FAILURE(Start());
  std::string error;
  auto client = FakeClient::Connect(dir_.path() + "/c.sock", 23, 8ull << 30, &error);
  ASSERT_NE(client, nullptr) << error;
  ASSERT_TRUE(WaitFor([&] { return Stage() == 1; }, Millis(10000), kPollInterval))
      << daemon_->output();
  // n = 1000 holds it in GEN_POLICY; an invalid reload changes nothing.
  ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: 2, stage_n: 1}\nlog: {level: loud}\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP));
  ASSERT_TRUE(daemon_->WaitForLine(std::regex("log.level: expected one of"), Millis(10000)))
      << daemon_->output();
  const std::uint64_t iterations = client->iterations_published();
  ASSERT_TRUE(WaitFor([&] { return client->iterations_published() > iterations + 20; },
                      Millis(10000), kPollInterval));
  EXPECT_EQ(Stage(), 1);
  // The valid file: applied live, the client is STABLE at its next iteration, still connected.
  ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: 2, stage_n: 1}\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP));
  ASSERT_TRUE(daemon_->WaitForLine(std::regex(R"(options updated: m=2, n=1,)"), Millis(10000)))
      << daemon_->output();
  EXPECT_TRUE(WaitFor([&] { return Stage() == 2; }, Millis(10000), kPollInterval))
      << daemon_->output();
  EXPECT_EQ(Clients(), 1);
}

TEST_F(ServiceProcessTest, ReloadOfARestartOnlyKeyKeepsItsValueAndSaysSo) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: 3}\nclients: {max: 7}\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP));
  ASSERT_TRUE(daemon_->WaitForLine(std::regex(R"(clients\.max changed; it needs a restart)"),
                                   Millis(10000)))
      << daemon_->output();
  ASSERT_TRUE(daemon_->WaitForLine(std::regex(R"(options updated: m=3,)"), Millis(10000)))
      << daemon_->output();
  // Logged once: by the supervisor, not again by the daemon.
  const std::string& out = daemon_->output();
  std::size_t count = 0;
  for (std::size_t at = 0; (at = out.find("clients.max changed", at)) != std::string::npos; ++at) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << out;
}

TEST_F(ServiceProcessTest, SigtermStopsGracefullyAndTheClientKeepsRunning) {
  ASSERT_NO_FATAL_FAILURE(Start());
  std::string error;
  auto client = FakeClient::Connect(dir_.path() + "/c.sock", 23, 8ull << 30, &error);
  ASSERT_NE(client, nullptr) << error;
  ASSERT_TRUE(WaitFor([&] { return Clients() == 1; }, Millis(10000), kPollInterval));
  ASSERT_TRUE(daemon_->Signal(SIGTERM));
  const auto code = daemon_->WaitExit(Millis(10000));
  ASSERT_TRUE(code.has_value()) << daemon_->output();
  EXPECT_EQ(*code, 0) << daemon_->output();
  EXPECT_GE(notify_->Count("STOPPING=1"), 1);
  EXPECT_EQ(access((dir_.path() + "/c.sock").c_str(), F_OK), -1) << "socket left behind";
  // The client outlives the daemon and keeps producing iterations.
  const std::uint64_t before = client->iterations_published();
  EXPECT_TRUE(WaitFor([&] { return client->iterations_published() > before + 10; }, Millis(5000),
                      kPollInterval));
}

TEST_F(ServiceProcessTest, CheckConfigNamesEveryErrorAndExitsTwo) {
  ASSERT_TRUE(WriteFile(config_, "detection: {stage_n: -3}\nsocket: {mode: \"0999\"}\n"));
  const Output out =
      RunCommand({CHAMELEOND_SERVICE_PATH, "--config", config_, "--check-config"}, Millis(10000));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(
      out.text.find(config_ + ": detection.stage_n: expected an integer in [0, 1000], got '-3'"),
      std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find(config_ + ": socket.mode: expected octal permission bits"),
            std::string::npos)
      << out.text;
  ASSERT_TRUE(WriteFile(config_, "detection: {stage_n: 3}\n"));
  const Output ok =
      RunCommand({CHAMELEOND_SERVICE_PATH, "--config", config_, "--check-config"}, Millis(10000));
  EXPECT_EQ(ok.exit_code, 0) << ok.text;
}

TEST_F(ServiceProcessTest, PrintConfigShowsFlagsMergedOverTheFile) {
  ASSERT_TRUE(WriteFile(config_, "detection: {stage_m: 4, stage_n: 7}\n"));
  const Output out =
      RunCommand({CHAMELEOND_SERVICE_PATH, "--config", config_, "--stage-n", "9", "--print-config"},
                 Millis(10000));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  const YAML::Node merged = YAML::Load(out.text);
  EXPECT_EQ(merged["detection"]["stage_m"].as<int>(), 4);
  EXPECT_EQ(merged["detection"]["stage_n"].as<int>(), 9);
}

}  // namespace
}  // namespace chameleon::service_test
