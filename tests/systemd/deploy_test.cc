// docs/deploy: the Kubernetes manifests hang together (host IPC, the socket directory shared by
// hostPath, the metrics port, how training pods get the library and the socket) and every
// metric the Grafana dashboard queries is one chameleond really exports.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "chameleon/daemon/config_file.h"
#include "fake_client.h"
#include "process_util.h"

namespace chameleon::service_test {
namespace {

const std::string kDeploy = std::string(CHAMELEON_SOURCE_DIR) + "/docs/deploy";

std::map<std::string, YAML::Node> DocumentsByKind(const std::string& path) {
  std::map<std::string, YAML::Node> kinds;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) {
    if (doc.IsMap() && doc["kind"]) kinds[doc["kind"].as<std::string>()] = doc;
  }
  return kinds;
}

YAML::Node Named(const YAML::Node& list, const std::string& name) {
  for (const YAML::Node& item : list) {
    if (item["name"] && item["name"].as<std::string>() == name) return item;
  }
  return YAML::Node();
}

std::string Dirname(const std::string& path) { return path.substr(0, path.rfind('/')); }

class DaemonSetTest : public testing::Test {
 protected:
  void SetUp() override {
    kinds_ = DocumentsByKind(kDeploy + "/chameleond-daemonset.yaml");
    ASSERT_EQ(kinds_.count("DaemonSet"), 1u);
    ASSERT_EQ(kinds_.count("ConfigMap"), 1u);
    ASSERT_EQ(kinds_.count("Service"), 1u);
    pod_ = kinds_["DaemonSet"]["spec"]["template"]["spec"];
    container_ = Named(pod_["containers"], "chameleond");
    ASSERT_TRUE(container_.IsDefined());
    const std::string yaml = kinds_["ConfigMap"]["data"]["chameleond.yaml"].as<std::string>();
    const daemon::ConfigResult config = daemon::ParseConfigText(yaml, "ConfigMap");
    ASSERT_TRUE(config.ok()) << config.ErrorText();
    config_ = config.config;
  }

  std::map<std::string, YAML::Node> kinds_;
  YAML::Node pod_;
  YAML::Node container_;
  daemon::ServiceConfig config_;
};

TEST_F(DaemonSetTest, SharesHostIpcAndTheSocketDirectory) {
  EXPECT_TRUE(pod_["hostIPC"].as<bool>());
  const std::string socket_dir = Dirname(config_.daemon.socket_path);
  const YAML::Node volume = Named(pod_["volumes"], "socket-dir");
  ASSERT_TRUE(volume.IsDefined());
  EXPECT_EQ(volume["hostPath"]["path"].as<std::string>(), socket_dir);
  EXPECT_EQ(Named(container_["volumeMounts"], "socket-dir")["mountPath"].as<std::string>(),
            socket_dir);
}

TEST_F(DaemonSetTest, RunsWithTheConfigMapAsItsConfigFile) {
  const YAML::Node command = container_["command"];
  ASSERT_TRUE(command.IsSequence());
  EXPECT_EQ(command[0].as<std::string>(), "/usr/sbin/chameleond");
  std::string config_path;
  for (std::size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i].as<std::string>() == "--config") config_path = command[i + 1].as<std::string>();
  }
  const YAML::Node mount = Named(container_["volumeMounts"], "config");
  ASSERT_TRUE(mount.IsDefined());
  EXPECT_EQ(config_path, mount["mountPath"].as<std::string>() + "/chameleond.yaml");
  EXPECT_EQ(Named(pod_["volumes"], "config")["configMap"]["name"].as<std::string>(),
            kinds_["ConfigMap"]["metadata"]["name"].as<std::string>());
}

TEST_F(DaemonSetTest, ExposesTheConfiguredMetricsPortOnThePodNetwork) {
  const std::string listen = config_.daemon.metrics_listen;
  const std::string host = listen.substr(0, listen.rfind(':'));
  const int port = std::stoi(listen.substr(listen.rfind(':') + 1));
  EXPECT_NE(host.rfind("127.", 0), 0u) << "loopback is unreachable from Prometheus in a pod";
  EXPECT_EQ(Named(container_["ports"], "metrics")["containerPort"].as<int>(), port);
  const YAML::Node annotations = kinds_["DaemonSet"]["spec"]["template"]["metadata"]["annotations"];
  EXPECT_EQ(annotations["prometheus.io/port"].as<std::string>(), std::to_string(port));
  EXPECT_EQ(annotations["prometheus.io/path"].as<std::string>(), "/metrics");
  EXPECT_EQ(Named(kinds_["Service"]["spec"]["ports"], "metrics")["port"].as<int>(), port);
}

TEST_F(DaemonSetTest, TrainingPodsGetTheLibraryAndTheSocket) {
  const auto example = DocumentsByKind(kDeploy + "/training-pod-example.yaml");
  ASSERT_EQ(example.count("Pod"), 1u);
  const YAML::Node spec = example.at("Pod")["spec"];
  const YAML::Node trainer = spec["containers"][0];
  std::map<std::string, std::string> env;
  for (const YAML::Node& e : trainer["env"])
    env[e["name"].as<std::string>()] = e["value"].as<std::string>();
  EXPECT_EQ(env["CHAMELEON_SOCKET"], config_.daemon.socket_path);
  // The library the pod preloads is in the host directory the DaemonSet's init container fills.
  const std::string library_dir =
      Named(pod_["volumes"], "preload-library")["hostPath"]["path"].as<std::string>();
  EXPECT_EQ(Dirname(env["LD_PRELOAD"]), library_dir);
  std::set<std::string> host_paths;
  for (const YAML::Node& v : spec["volumes"])
    host_paths.insert(v["hostPath"]["path"].as<std::string>());
  EXPECT_EQ(host_paths.count(library_dir), 1u);
  EXPECT_EQ(host_paths.count(Dirname(config_.daemon.socket_path)), 1u);
  // The socket is 0660 owned by the daemon's group: the pod must be in that group.
  EXPECT_EQ(config_.daemon.socket_mode, 0660u);
  const int gid = pod_["securityContext"]["runAsGroup"].as<int>();
  bool member = false;
  for (const YAML::Node& g : spec["securityContext"]["supplementalGroups"])
    member |= g.as<int>() == gid;
  EXPECT_TRUE(member) << "training pods need supplementalGroups [" << gid << "]";
}

/// Every chameleon_ name in the dashboard's queries (panel targets and template variables).
std::set<std::string> DashboardMetrics() {
  const auto dash = nlohmann::json::parse(ReadFile(kDeploy + "/grafana-dashboard.json"));
  std::vector<std::string> exprs;
  for (const auto& panel : dash["panels"]) {
    for (const auto& target : panel["targets"]) exprs.push_back(target["expr"]);
  }
  for (const auto& var : dash["templating"]["list"]) {
    if (var.contains("definition")) exprs.push_back(var["definition"]);
  }
  std::set<std::string> names;
  const std::regex name(R"(\bchameleon_[a-z0-9_]+)");
  for (const std::string& e : exprs) {
    for (auto it = std::sregex_iterator(e.begin(), e.end(), name); it != std::sregex_iterator();
         ++it) {
      names.insert(it->str());
    }
  }
  return names;
}

TEST(GrafanaDashboardTest, QueriesOnlyMetricsTheDaemonExports) {
  const std::set<std::string> wanted = DashboardMetrics();
  ASSERT_GE(wanted.size(), 15u);  // the dashboard covers the daemon, not a token metric
  TempDir dir("chameleon-dash");
  std::string error;
  auto daemon = StartChameleond(CHAMELEOND_PATH, dir.path(), {}, &error);
  ASSERT_TRUE(daemon.has_value()) << error;
  // A client gives the per-client families their series.
  auto client = FakeClient::Connect(daemon->socket_path, 29, 8ull << 30, &error);
  ASSERT_NE(client, nullptr) << error;
  std::string body;
  ASSERT_TRUE(WaitFor(
      [&] {
        body = HttpGet(daemon->metrics_port, "/metrics", Millis(2000)).value_or("");
        return body.find("chameleon_client_pid{") != std::string::npos;
      },
      Millis(10000), kPollInterval));
  std::set<std::string> exported;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    exported.insert(line.substr(0, line.find_first_of("{ ")));
  }
  for (const std::string& name : wanted) {
    EXPECT_EQ(exported.count(name), 1u)
        << "the dashboard queries " << name << ", which chameleond does not export";
  }
}

TEST(GrafanaDashboardTest, IsAnImportableDashboard) {
  const auto dash = nlohmann::json::parse(ReadFile(kDeploy + "/grafana-dashboard.json"));
  EXPECT_FALSE(dash["uid"].get<std::string>().empty());
  std::set<int> ids;
  for (const auto& panel : dash["panels"]) {
    EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << "duplicate panel id";
    EXPECT_FALSE(panel["targets"].empty()) << panel["title"];
    EXPECT_EQ(panel["datasource"]["uid"], "${datasource}") << panel["title"];
  }
}

}  // namespace
}  // namespace chameleon::service_test
