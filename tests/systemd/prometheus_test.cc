// Prometheus for real: Debian's prometheus server, on loopback with a generated config and a
// scratch TSDB, scrapes a running chameleond that serves a client; the test waits for scrapes by
// polling the server's HTTP API (deadlines, no sleeps) and checks several chameleon_ series for
// the values the client implies. `promtool check metrics` lints the exposition.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "fake_client.h"
#include "process_util.h"

namespace chameleon::service_test {
namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kPromtool = "/usr/bin/promtool";
constexpr std::uint32_t kOpsPerIteration = 37;  // an odd period nothing else produces

std::string UrlEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class PrometheusTest : public testing::Test {
 protected:
  void SetUp() override {
    // A missing server is a broken setup, not a reason to skip: scripts/setup installs it.
    ASSERT_EQ(access(kPrometheus, X_OK), 0) << kPrometheus << " missing: install Debian's "
                                            << "prometheus package (scripts/setup does)";
    ASSERT_EQ(access(kPromtool, X_OK), 0) << kPromtool << " missing: install Debian's "
                                          << "prometheus package (scripts/setup does)";
    std::string error;
    auto d = StartChameleond(CHAMELEOND_PATH, dir_.path(), {}, &error);
    ASSERT_TRUE(d.has_value()) << error;
    daemon_ = std::move(*d);
  }

  /// Starts prometheus scraping the daemon every 100 ms and waits until it is ready.
  void StartPrometheus() {
    web_port_ = PickFreePort();
    ASSERT_GT(web_port_, 0);
    const std::string config = dir_.path() + "/prometheus.yml";
    ASSERT_TRUE(WriteFile(config,
                          "global:\n"
                          "  scrape_interval: 100ms\n"
                          "  scrape_timeout: 90ms\n"
                          "scrape_configs:\n"
                          "  - job_name: chameleond\n"
                          "    static_configs:\n"
                          "      - targets: ['127.0.0.1:" +
                              std::to_string(daemon_.metrics_port) + "']\n"));
    ASSERT_EQ(RunCommand({kPromtool, "check", "config", config}, Millis(20000)).exit_code, 0);
    std::string error;
    prometheus_ = Child::Spawn(
        {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir_.path() + "/tsdb",
         "--web.listen-address=127.0.0.1:" + std::to_string(web_port_)},
        {}, &error);
    ASSERT_NE(prometheus_, nullptr) << error;
    ASSERT_TRUE(WaitFor([&] { return HttpGet(web_port_, "/-/ready", Millis(500)).has_value(); },
                        Millis(20000), kPollInterval))
        << prometheus_->output();
  }

  /// Runs an instant query; the (labels, value) of every series in the result.
  std::vector<std::pair<nlohmann::json, double>> Query(const std::string& expr) {
    const auto body = HttpGet(web_port_, "/api/v1/query?query=" + UrlEncode(expr), Millis(2000));
    std::vector<std::pair<nlohmann::json, double>> out;
    if (!body) return out;
    const auto json = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || json.value("status", "") != "success") return out;
    for (const auto& series : json["data"]["result"]) {
      out.emplace_back(series["metric"], std::stod(series["value"][1].get<std::string>()));
    }
    return out;
  }

  /// Polls until `expr` returns exactly one series with value `expected`.
  bool EventuallyEquals(const std::string& expr, double expected, Millis timeout) {
    return WaitFor(
        [&] {
          const auto r = Query(expr);
          return r.size() == 1 && r[0].second == expected;
        },
        timeout, kPollInterval);
  }

  std::string LastValue(const std::string& expr) {
    const auto r = Query(expr);
    return r.empty() ? "(no series)" : std::to_string(r[0].second);
  }

  TempDir dir_{"chameleon-prom"};
  RunningDaemon daemon_;
  std::unique_ptr<Child> prometheus_;
  int web_port_ = 0;
};

TEST_F(PrometheusTest, ScrapesTheDaemonServingAClientWithExpectedValues) {
  std::string error;
  auto client = FakeClient::Connect(daemon_.socket_path, kOpsPerIteration, 16ull << 30, &error);
  ASSERT_NE(client, nullptr) << error;
  ASSERT_NO_FATAL_FAILURE(StartPrometheus());
  const Millis deadline(20000);

  ASSERT_TRUE(EventuallyEquals("up{job=\"chameleond\"}", 1, deadline)) << LastValue("up") << "\n"
                                                                       << prometheus_->output();
  EXPECT_TRUE(EventuallyEquals("chameleon_clients", 1, deadline)) << LastValue("chameleon_clients");
  EXPECT_TRUE(EventuallyEquals("chameleon_client_connections_total", 1, deadline));
  // The client's slot: the series whose pid is ours (SO_PEERCRED, not what HELLO claimed).
  std::string slot;
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto r = Query("chameleon_client_pid == " + std::to_string(getpid()));
        if (r.size() == 1) slot = r[0].first.value("client", "");
        return !slot.empty();
      },
      deadline, kPollInterval));
  const std::string sel = "{client=\"" + slot + "\"}";
  // The detected iteration is exactly the client's period, and its stage left WARMUP after
  // m stable steps of identical iterations.
  EXPECT_TRUE(EventuallyEquals("chameleon_iteration_ops" + sel, kOpsPerIteration, deadline))
      << LastValue("chameleon_iteration_ops" + sel);
  EXPECT_TRUE(WaitFor(
      [&] {
        const auto r = Query("chameleon_client_stage" + sel + " >= 1");
        return r.size() == 1;
      },
      deadline, kPollInterval))
      << LastValue("chameleon_client_stage" + sel);
  // Every op the client published reaches the daemon: drained records grow past several periods.
  EXPECT_TRUE(WaitFor(
      [&] {
        return Query("chameleon_records_drained_total" + sel + " > " +
                     std::to_string(5 * kOpsPerIteration))
                   .size() == 1;
      },
      deadline, kPollInterval))
      << LastValue("chameleon_records_drained_total" + sel);
  EXPECT_TRUE(EventuallyEquals("chameleon_records_dropped_total" + sel, 0, deadline));
  // Rates work on the counters (the dashboard's queries): ops drained per second is positive.
  EXPECT_TRUE(WaitFor(
      [&] { return Query("rate(chameleon_records_drained_total" + sel + "[1s]) > 0").size() == 1; },
      deadline, kPollInterval));

  // The client leaves: the gauge follows and the slot's stage says "no client".
  client.reset();
  EXPECT_TRUE(EventuallyEquals("chameleon_clients", 0, deadline));
  EXPECT_TRUE(EventuallyEquals("chameleon_client_stage" + sel, -1, deadline));
  EXPECT_TRUE(EventuallyEquals("chameleon_client_disconnects_total", 1, deadline));
}

TEST_F(PrometheusTest, PromtoolFindsTheExpositionClean) {
  std::string error;
  auto client = FakeClient::Connect(daemon_.socket_path, kOpsPerIteration, 16ull << 30, &error);
  ASSERT_NE(client, nullptr) << error;
  // Lint an exposition that has per-client series, not only the empty families.
  std::string body;
  ASSERT_TRUE(WaitFor(
      [&] {
        body = HttpGet(daemon_.metrics_port, "/metrics", Millis(2000)).value_or("");
        return body.find("chameleon_client_pid{client=") != std::string::npos;
      },
      Millis(10000), kPollInterval))
      << body;
  const Output lint = RunCommand({kPromtool, "check", "metrics"}, Millis(20000), body);
  EXPECT_EQ(lint.exit_code, 0) << lint.text;
  EXPECT_EQ(lint.text, "") << lint.text;
}

}  // namespace
}  // namespace chameleon::service_test
