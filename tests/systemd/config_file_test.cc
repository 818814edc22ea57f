// The config file reader: the documented example loads, every invalid field is named with its
// key path, expected type/range and the value found, unknown keys are errors.
#include "chameleon/daemon/config_file.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

namespace chameleon::daemon {
namespace {

std::string ExamplePath() {
  return std::string(CHAMELEON_SOURCE_DIR) + "/systemd/chameleond.yaml.example";
}

TEST(ConfigFileTest, ExampleFileLoadsAndDiffersFromDefaultsOnlyInSocketAccess) {
  const ConfigResult result = LoadConfigFile(ExamplePath());
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  // The example documents the defaults; the package narrows the socket to a group.
  ServiceConfig expected;
  expected.daemon.socket_mode = 0660;
  expected.socket_group = "chameleon";
  EXPECT_EQ(ToYaml(result.config), ToYaml(expected));
  EXPECT_EQ(result.config.daemon.socket_mode, 0660u);
  EXPECT_EQ(result.config.socket_group, "chameleon");
  EXPECT_EQ(result.config.daemon.policy.min_swap_bytes, 1u << 20);
}

TEST(ConfigFileTest, EmptyDocumentKeepsTheBase) {
  ServiceConfig base;
  base.daemon.detection.stage_m = 7;
  const ConfigResult result = ParseConfigText("# nothing but a comment\n", "t.yaml", base);
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  EXPECT_EQ(result.config.daemon.detection.stage_m, 7);
}

TEST(ConfigFileTest, AbsentKeysKeepTheBaseAndPresentOnesOverrideIt) {
  ServiceConfig base;
  base.daemon.detection.stage_n = 9;
  const ConfigResult result = ParseConfigText(
      "detection:\n  stage_m: 4\nclients:\n  heartbeat_timeout_ms: 7000\n", "t.yaml", base);
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  EXPECT_EQ(result.config.daemon.detection.stage_m, 4);
  EXPECT_EQ(result.config.daemon.detection.stage_n, 9);
  EXPECT_EQ(result.config.daemon.heartbeat_timeout_ns, 7'000'000'000u);
}

TEST(ConfigFileTest, ReadsEverySectionIntoItsField) {
  const char* text = R"(
socket: {path: /tmp/x/c.sock, mode: 0640, group: gpu-users}
metrics: {listen: "[::1]:9999"}
clients: {max: 12, drain_interval_ms: 5, drain_batch_records: 100, housekeeping_interval_ms: 50,
          heartbeat_interval_ms: 20, heartbeat_timeout_ms: 900, stuck_record_timeout_ms: 300}
detection: {stage_m: 3, stage_n: 6, similarity_threshold: 0.9, length_change_threshold: 0.1,
            min_periods: 4, min_period_ops: 12, max_gram: 5, gap_tolerance: 0.2, max_history_ops: 4096,
            boundary_patterns: ["*step*", "adam*"]}
policy: {size_weight: 1.5, prefetch_margin: 0.25, host_bandwidth_bytes_per_s: 12e9,
         device_to_host_bytes_per_s: 4.68e10, host_to_device_bytes_per_s: 5.48e10,
         link_efficiency: 0.5, full_duplex: no, min_swap_bytes: 2MiB, cross_iteration: false,
         layers_per_phase: 16, chunk_bytes: 4MiB, reserve_bytes: 8MiB, reserve_feedback: no,
         remembered_plans: 3, predict_switches: false}
devices: [{index: 0, memory_limit: 1.5GiB}, {index: 3, memory_limit: 512MB}]
log: {level: debug}
)";
  const ConfigResult r = ParseConfigText(text, "t.yaml");
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const ServiceConfig& c = r.config;
  EXPECT_EQ(c.daemon.socket_path, "/tmp/x/c.sock");
  EXPECT_EQ(c.daemon.socket_mode, 0640u);
  EXPECT_EQ(c.socket_group, "gpu-users");
  EXPECT_EQ(c.daemon.metrics_listen, "[::1]:9999");
  EXPECT_EQ(c.daemon.max_clients, 12u);
  EXPECT_EQ(c.daemon.drain_interval_ms, 5u);
  EXPECT_EQ(c.daemon.drain_batch_records, 100u);
  EXPECT_EQ(c.daemon.housekeeping_interval_ms, 50u);
  EXPECT_EQ(c.daemon.heartbeat_interval_ns, 20'000'000u);
  EXPECT_EQ(c.daemon.heartbeat_timeout_ns, 900'000'000u);
  EXPECT_EQ(c.daemon.stuck_record_timeout_ns, 300'000'000u);
  EXPECT_EQ(c.daemon.detection.stage_m, 3);
  EXPECT_EQ(c.daemon.detection.stage_n, 6);
  EXPECT_DOUBLE_EQ(c.daemon.detection.similarity_threshold, 0.9);
  EXPECT_DOUBLE_EQ(c.daemon.detection.length_change_threshold, 0.1);
  EXPECT_EQ(c.daemon.detection.min_periods, 4u);
  EXPECT_EQ(c.daemon.detection.min_period_ops, 12u);
  EXPECT_EQ(c.daemon.detection.max_gram, 5u);
  EXPECT_DOUBLE_EQ(c.daemon.detection.gap_tolerance, 0.2);
  EXPECT_EQ(c.daemon.detection.max_history_ops, 4096u);
  EXPECT_EQ(c.daemon.detection.boundary_patterns, (std::vector<std::string>{"*step*", "adam*"}));
  EXPECT_DOUBLE_EQ(c.daemon.policy.size_weight, 1.5);
  EXPECT_DOUBLE_EQ(c.daemon.policy.prefetch_margin, 0.25);
  EXPECT_DOUBLE_EQ(c.daemon.policy.host_bandwidth_bytes_per_s, 12e9);
  EXPECT_DOUBLE_EQ(c.daemon.policy.device_to_host_bytes_per_s, 4.68e10);
  EXPECT_DOUBLE_EQ(c.daemon.policy.host_to_device_bytes_per_s, 5.48e10);
  EXPECT_DOUBLE_EQ(c.daemon.policy.link_efficiency, 0.5);
  EXPECT_FALSE(c.daemon.policy.full_duplex);
  EXPECT_EQ(c.daemon.policy.min_swap_bytes, 2u << 20);
  EXPECT_FALSE(c.daemon.policy.cross_iteration);
  EXPECT_EQ(c.daemon.policy.layers_per_phase, 16u);
  EXPECT_EQ(c.daemon.policy.chunk_bytes, 4u << 20);
  EXPECT_EQ(c.daemon.policy.reserve_bytes, 8u << 20);
  EXPECT_FALSE(c.daemon.reserve_feedback);
  EXPECT_EQ(c.daemon.remembered_plans, 3u);
  EXPECT_FALSE(c.daemon.predict_switches);
  ASSERT_EQ(c.daemon.device_limits.size(), 2u);
  EXPECT_EQ(c.daemon.device_limits[0].index, 0u);
  EXPECT_EQ(c.daemon.device_limits[0].limit_bytes, 1610612736u);
  EXPECT_EQ(c.daemon.device_limits[1].index, 3u);
  EXPECT_EQ(c.daemon.device_limits[1].limit_bytes, 512'000'000u);
  EXPECT_EQ(c.log_level, "debug");
}

TEST(ConfigFileTest, ModeIsOctalInEverySpelling) {
  for (const char* spelling : {"\"0660\"", "0660", "660", "0o660"}) {
    const ConfigResult r = ParseConfigText(std::string("socket: {mode: ") + spelling + "}", "t");
    ASSERT_TRUE(r.ok()) << spelling << ": " << r.ErrorText();
    EXPECT_EQ(r.config.daemon.socket_mode, 0660u) << spelling;
  }
}

TEST(ConfigFileTest, ToYamlRoundTripsEveryField) {
  ServiceConfig c;
  c.daemon.socket_path = "/run/x.sock";
  c.daemon.socket_mode = 0600;
  c.socket_group = "gpu";
  c.daemon.metrics_listen = "";
  c.daemon.detection.stage_m = 11;
  c.daemon.detection.similarity_threshold = 0.123456789012345;
  c.daemon.detection.boundary_patterns = {"a*", "b?c"};
  c.daemon.policy.size_weight = 3.25;
  c.daemon.policy.full_duplex = false;
  c.daemon.remembered_plans = 0;
  c.daemon.predict_switches = false;
  c.daemon.device_limits = {{2, 123456789}, {0, 99}};
  c.log_level = "warn";
  const ConfigResult back = ParseConfigText(ToYaml(c), "roundtrip");
  ASSERT_TRUE(back.ok()) << back.ErrorText() << "\n" << ToYaml(c);
  EXPECT_EQ(ToYaml(back.config), ToYaml(c));
  EXPECT_EQ(back.config.daemon.detection.similarity_threshold, 0.123456789012345);
  EXPECT_EQ(back.config.daemon.device_limits[0].limit_bytes, 123456789u);
  EXPECT_EQ(back.config.daemon.metrics_listen, "");
  EXPECT_EQ(back.config.daemon.remembered_plans, 0u);
  EXPECT_FALSE(back.config.daemon.predict_switches);
}

TEST(ConfigFileTest, CollectsEveryErrorNotJustTheFirst) {
  const ConfigResult r =
      ParseConfigText("detection: {stage_m: -1, stage_n: x}\nlog: {level: loud}\n", "t.yaml");
  ASSERT_EQ(r.errors.size(), 2u) << r.ErrorText();  // cross-field checks wait for clean fields
  EXPECT_NE(r.ErrorText().find("detection.stage_m"), std::string::npos);
  EXPECT_NE(r.ErrorText().find("detection.stage_n"), std::string::npos);
}

TEST(ConfigFileTest, SyntaxErrorNamesLineAndColumn) {
  const ConfigResult r = ParseConfigText("socket:\n  path: [unclosed\n", "bad.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].rfind("bad.yaml:", 0), 0u) << r.errors[0];
  EXPECT_NE(r.errors[0].find("not valid YAML"), std::string::npos) << r.errors[0];
}

TEST(ConfigFileTest, MissingFileIsAnErrorNamingThePath) {
  const ConfigResult r = LoadConfigFile("/nonexistent/chameleond.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0],
            "/nonexistent/chameleond.yaml: cannot read the config file: No such file or directory");
}

// The reader must know every option. When a field is added to DaemonOptions, DetectionOptions,
// GeneratorOptions or DeviceLimit, this fails: add it to config_file.cc (reader), config_yaml.cc
// (ToYaml), the example file, ReadsEverySectionIntoItsField, live_options.cc (restart-only or
// live) and docs/operations.md's reload table, then update the sizes here.
TEST(ConfigFileTest, KnowsEveryOptionField) {
  EXPECT_EQ(sizeof(DetectionOptions), 80u) << "DetectionOptions changed: update the config file";
  // DaemonOptions::deduplicate_candidates is not a config key either: turning it off exists for
  // comparison with the paper's behaviour and for tests that need one generation per config.
  EXPECT_EQ(sizeof(DaemonOptions), 456u) << "DaemonOptions changed: update the config file";
  // GeneratorOptions::release_at_issue is not a config key: the daemon always plans for the
  // shim's executor, which releases memory when transfers are issued (session_policy.cc).
  EXPECT_EQ(sizeof(policy::GeneratorOptions), 104u)
      << "GeneratorOptions changed: update the config";
  EXPECT_EQ(sizeof(DeviceLimit), 16u) << "DeviceLimit changed: update the config file";
  EXPECT_EQ(sizeof(LendingOptions), 112u) << "LendingOptions changed: update the config file";
}

TEST(ConfigFileTest, ReadsTheLendingSection) {
  const ConfigResult r = ParseConfigText(
      "lending: {placement: host, gpus: [0000:18:00.0, 0000:2A:00.0, 0000:18:00.0],\n"
      "          lender_uids: [1000, 0], borrower_uids: all, reserve: 2GiB,\n"
      "          revoke_deadline_ms: 250}\n",
      "t.yaml");
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const LendingOptions& l = r.config.daemon.lending;
  EXPECT_FALSE(l.node_placement);
  EXPECT_FALSE(l.all_gpus);
  // Lower-cased (HELLO's spelling), duplicates dropped.
  EXPECT_EQ(l.gpus, (std::vector<std::string>{"0000:18:00.0", "0000:2a:00.0"}));
  EXPECT_TRUE(l.LendsGpu("0000:2a:00.0"));
  EXPECT_FALSE(l.LendsGpu("0000:3b:00.0"));
  EXPECT_FALSE(l.lenders.all);
  EXPECT_TRUE(l.lenders.Allows(0));
  EXPECT_FALSE(l.lenders.Allows(1001));
  EXPECT_TRUE(l.borrowers.Allows(1001));
  EXPECT_EQ(l.reserve_bytes, 2ull << 30);
  EXPECT_EQ(l.revoke_deadline_ns, 250'000'000u);
  const ConfigResult back = ParseConfigText(ToYaml(r.config), "roundtrip");
  ASSERT_TRUE(back.ok()) << back.ErrorText() << "\n" << ToYaml(r.config);
  EXPECT_EQ(ToYaml(back.config), ToYaml(r.config));
  const ConfigResult all = ParseConfigText("lending: {gpus: all}", "t.yaml");
  ASSERT_TRUE(all.ok()) << all.ErrorText();
  EXPECT_TRUE(all.config.daemon.lending.LendsGpu("0000:99:00.0"));
  EXPECT_EQ(ParseConfigText(ToYaml(all.config), "rt").config.daemon.lending.all_gpus, true);
  // Off by default: no GPU lends until the operator opts it in.
  EXPECT_FALSE(LendingOptions{}.LendsGpu("0000:18:00.0"));
}

/// "section.key" for every key of a document in the file's schema.
std::set<std::string> KeysOf(const YAML::Node& root) {
  std::set<std::string> keys;
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    if (!section.second.IsMap()) {
      keys.insert(name);
      continue;
    }
    for (const auto& kv : section.second) keys.insert(name + "." + kv.first.Scalar());
  }
  return keys;
}

// Every key ToYaml writes (so every option the reader knows) is documented in the example file,
// and the example has no key the schema lacks.
TEST(ConfigFileTest, ExampleFileDocumentsEveryKey) {
  const std::set<std::string> schema = KeysOf(YAML::Load(ToYaml(ServiceConfig{})));
  const std::set<std::string> example = KeysOf(YAML::LoadFile(ExamplePath()));
  EXPECT_EQ(example, schema);
  EXPECT_GE(schema.size(), 31u);  // 3 socket, 1 metrics, 7 clients, 10 detection, 8 policy, ...
}

/// One invalid document and the exact error line it must produce.
struct BadCase {
  const char* yaml;
  const char* error;
};

class InvalidFieldTest : public testing::TestWithParam<BadCase> {};

TEST_P(InvalidFieldTest, IsNamedPrecisely) {
  const ConfigResult r = ParseConfigText(GetParam().yaml, "t.yaml");
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0], std::string("t.yaml: ") + GetParam().error);
}

constexpr BadCase kBadCases[] = {
    {"- a\n- b\n", "(top level): expected a map, got a list"},
    {"sockets: {}",
     "sockets: unknown key (expected one of: socket, metrics, clients, detection, "
     "policy, devices, log, lending)"},
    {"socket: /run/x.sock", "socket: expected a map, got '/run/x.sock'"},
    {"socket: {path: rel.sock}",
     "socket.path: expected an absolute path of at most 107 bytes, got 'rel.sock'"},
    {"socket: {path: [a]}", "socket.path: expected a string, got a list"},
    {"socket: {mode: \"0999\"}",
     "socket.mode: expected octal permission bits in [0, 0777] such as \"0660\", got '0999'"},
    {"socket: {mode: 01777}",
     "socket.mode: expected octal permission bits in [0, 0777] such as \"0660\", got '01777'"},
    {"socket: {group: Wheel!}",
     "socket.group: expected a group name ([a-z_][a-z0-9_-]*, at most 32 characters) or empty, "
     "got 'Wheel!'"},
    {"socket: {owner: root}", "socket.owner: unknown key (expected one of: path, mode, group)"},
    {"metrics: {listen: localhost}",
     "metrics.listen: expected HOST:PORT with PORT in [0, 65535] (IPv6 as [ADDR]:PORT) or empty "
     "to disable, got 'localhost'"},
    {"metrics: {listen: \"127.0.0.1:70000\"}",
     "metrics.listen: expected HOST:PORT with PORT in [0, 65535] (IPv6 as [ADDR]:PORT) or empty "
     "to disable, got '127.0.0.1:70000'"},
    {"clients: {max: 0}", "clients.max: expected an integer in [1, 4096], got '0'"},
    {"clients: {max: 2.5}", "clients.max: expected an integer in [1, 4096], got '2.5'"},
    {"clients: {drain_interval_ms: 0}",
     "clients.drain_interval_ms: expected an integer in [1, 1000], got '0'"},
    {"clients: {drain_batch_records: 99999999}",
     "clients.drain_batch_records: expected an integer in [1, 16777216], got '99999999'"},
    {"clients: {housekeeping_interval_ms: 5}",
     "clients.housekeeping_interval_ms: expected an integer in [10, 10000], got '5'"},
    {"clients: {heartbeat_interval_ms: 1}",
     "clients.heartbeat_interval_ms: expected an integer in [10, 60000], got '1'"},
    {"clients: {heartbeat_timeout_ms: 150}",
     "clients.heartbeat_timeout_ms: expected more than twice max(heartbeat_interval_ms, "
     "housekeeping_interval_ms) = 200, got '150'"},
    {"clients: {stuck_record_timeout_ms: 1e3}",
     "clients.stuck_record_timeout_ms: expected an integer in [10, 60000], got '1e3'"},
    {"detection: {stage_m: two}", "detection.stage_m: expected an integer in [0, 1000], got 'two'"},
    {"detection: {stage_n: 1001}",
     "detection.stage_n: expected an integer in [0, 1000], got '1001'"},
    {"detection: {stage_n: }",
     "detection.stage_n: expected an integer in [0, 1000], got nothing (null)"},
    {"detection: {similarity_threshold: 1.5}",
     "detection.similarity_threshold: expected a number in [0, 1], got '1.5'"},
    {"detection: {length_change_threshold: nan}",
     "detection.length_change_threshold: expected a number in [0, 1], got 'nan'"},
    {"detection: {min_periods: 1}",
     "detection.min_periods: expected an integer in [2, 64], got '1'"},
    {"detection: {max_gram: 0}", "detection.max_gram: expected an integer in [1, 64], got '0'"},
    {"detection: {gap_tolerance: -0.1}",
     "detection.gap_tolerance: expected a number in [0, 1], got '-0.1'"},
    {"detection: {max_history_ops: 10}",
     "detection.max_history_ops: expected an integer in [1024, 268435456], got '10'"},
    {"detection: {boundary_patterns: \"*step*\"}",
     "detection.boundary_patterns: expected a list of non-empty strings, got '*step*'"},
    {"detection: {boundary_patterns: [a, \"\"]}",
     "detection.boundary_patterns[1]: expected a non-empty string, got ''"},
    {"detection: {stage: 2}",
     "detection.stage: unknown key (expected one of: stage_m, stage_n, similarity_threshold, "
     "length_change_threshold, min_periods, min_period_ops, max_gram, gap_tolerance, "
     "max_history_ops, boundary_patterns)"},
    {"detection: {min_period_ops: 0}",
     "detection.min_period_ops: expected an integer in [1, 1048576], got '0'"},
    {"policy: {size_weight: heavy}",
     "policy.size_weight: expected a number in [0, 100], got 'heavy'"},
    {"policy: {prefetch_margin: 2}",
     "policy.prefetch_margin: expected a number in [0, 1], got '2'"},
    {"policy: {host_bandwidth_bytes_per_s: 0}",
     "policy.host_bandwidth_bytes_per_s: expected a number in (0, 1e+13], got '0'"},
    {"policy: {link_efficiency: 0}",
     "policy.link_efficiency: expected a number in (0, 1], got '0'"},
    {"policy: {full_duplex: maybe}", "policy.full_duplex: expected true or false, got 'maybe'"},
    {"policy: {predict_switches: maybe}",
     "policy.predict_switches: expected true or false, got 'maybe'"},
    {"policy: {min_swap_bytes: 12 parsecs}",
     "policy.min_swap_bytes: expected a byte size >= 0 (bytes, optionally with B, k/K, kB/KB, "
     "M(B), G(B), T(B) (powers of 1000) or KiB, MiB, GiB, "
     "TiB (powers of 1024), e.g. 8589934592, 8GiB, 512MB, 1.5GiB), got '12 parsecs' "
     "(unknown unit)"},
    {"policy: {layers_per_phase: 5000}",
     "policy.layers_per_phase: expected an integer in [0, 4096], got '5000'"},
    {"devices: {index: 0}", "devices: expected a list of {index, memory_limit} maps, got a map"},
    {"devices: [{index: 0}]", "devices[0].memory_limit: required key is missing"},
    {"devices: [{index: 0, memory_limit: 0}]",
     "devices[0].memory_limit: expected a byte size >= 1 (bytes, optionally with B, k/K, kB/KB, "
     "M(B), G(B), T(B) (powers of 1000) or KiB, MiB, GiB, "
     "TiB (powers of 1024), e.g. 8589934592, 8GiB, 512MB, 1.5GiB), got '0'"},
    {"devices: [{index: 2000, memory_limit: 1GiB}]",
     "devices[0].index: expected an integer in [0, 1023], got '2000'"},
    {"devices: [{index: 1, memory_limit: 1GiB}, {index: 1, memory_limit: 2GiB}]",
     "devices[1].index: expected a device index not listed before, got '1' again"},
    {"lending: {placement: peer}",
     "lending.placement: expected 'node' (peer GPUs and NUMA nodes) or 'host' (host memory "
     "only), got 'peer'"},
    {"lending: {gpus: some}", "lending.gpus: expected 'all' or a list of PCI bus ids, got 'some'"},
    {"lending: {gpus: [\"0:18:00.0\"]}",
     "lending.gpus[0]: expected a PCI bus id such as 0000:18:00.0, got '0:18:00.0'"},
    {"lending: {lender_uids: [root]}",
     "lending.lender_uids[0]: expected a uid (an integer in [0, 4294967295]), got 'root'"},
    {"lending: {borrower_uids: 5}",
     "lending.borrower_uids: expected 'all' or a list of uids, got '5'"},
    {"lending: {revoke_deadline_ms: 1}",
     "lending.revoke_deadline_ms: expected an integer in [10, 600000], got '1'"},
    {"lending: {lease: 1}",
     "lending.lease: unknown key (expected one of: placement, gpus, lender_uids, borrower_uids, "
     "reserve, revoke_deadline_ms)"},
    {"devices: [{index: 0, memory_limit: 1GiB, uuid: x}]",
     "devices[0].uuid: unknown key (expected one of: index, memory_limit)"},
    {"log: {level: loud}",
     "log.level: expected one of trace, debug, info, warn, error, critical, off, got 'loud'"},
};

INSTANTIATE_TEST_SUITE_P(EveryKey, InvalidFieldTest, testing::ValuesIn(kBadCases));

}  // namespace
}  // namespace chameleon::daemon
