#include "chameleon/daemon/config_file.h"

#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "config_lending.h"
#include "config_reader.h"

namespace chameleon::daemon {

namespace {

using detail::ConfigReader;

void ReadSocket(ConfigReader& r, const YAML::Node& n, ServiceConfig* c) {
  if (!n.IsDefined() || !r.CheckMap(n, "socket", {"path", "mode", "group"})) return;
  r.String(n, "socket", "path", &c->daemon.socket_path);
  r.Mode(n, "socket", "mode", &c->daemon.socket_mode);
  r.String(n, "socket", "group", &c->socket_group);
}

void ReadMetrics(ConfigReader& r, const YAML::Node& n, ServiceConfig* c) {
  if (!n.IsDefined() || !r.CheckMap(n, "metrics", {"listen"})) return;
  r.String(n, "metrics", "listen", &c->daemon.metrics_listen);
}

void ReadClients(ConfigReader& r, const YAML::Node& n, ServiceConfig* c) {
  static constexpr const char* kPath = "clients";
  if (!n.IsDefined() ||
      !r.CheckMap(n, kPath,
                  {"max", "drain_interval_ms", "drain_batch_records", "housekeeping_interval_ms",
                   "heartbeat_interval_ms", "heartbeat_timeout_ms", "stuck_record_timeout_ms"})) {
    return;
  }
  DaemonOptions& d = c->daemon;
  r.Unsigned32(n, kPath, "max", 1, 4096, &d.max_clients);
  r.Unsigned32(n, kPath, "drain_interval_ms", 1, 1000, &d.drain_interval_ms);
  r.Unsigned32(n, kPath, "drain_batch_records", 1, 1u << 24, &d.drain_batch_records);
  r.Unsigned32(n, kPath, "housekeeping_interval_ms", 10, 10'000, &d.housekeeping_interval_ms);
  r.MillisToNanos(n, kPath, "heartbeat_interval_ms", 10, 60'000, &d.heartbeat_interval_ns);
  r.MillisToNanos(n, kPath, "heartbeat_timeout_ms", 100, 3'600'000, &d.heartbeat_timeout_ns);
  r.MillisToNanos(n, kPath, "stuck_record_timeout_ms", 10, 60'000, &d.stuck_record_timeout_ns);
}

void ReadDetection(ConfigReader& r, const YAML::Node& n, ServiceConfig* c) {
  static constexpr const char* kPath = "detection";
  if (!n.IsDefined() ||
      !r.CheckMap(n, kPath,
                  {"stage_m", "stage_n", "similarity_threshold", "length_change_threshold",
                   "min_periods", "min_period_ops", "max_gram", "gap_tolerance", "max_history_ops",
                   "boundary_patterns"})) {
    return;
  }
  DetectionOptions& d = c->daemon.detection;
  r.Int(n, kPath, "stage_m", 0, 1000, &d.stage_m);
  r.Int(n, kPath, "stage_n", 0, 1000, &d.stage_n);
  r.Double(n, kPath, "similarity_threshold", 0.0, 1.0, &d.similarity_threshold);
  r.Double(n, kPath, "length_change_threshold", 0.0, 1.0, &d.length_change_threshold);
  r.Unsigned32(n, kPath, "min_periods", 2, 64, &d.min_periods);
  r.Unsigned32(n, kPath, "min_period_ops", 1, 1u << 20, &d.min_period_ops);
  r.Unsigned32(n, kPath, "max_gram", 1, 64, &d.max_gram);
  r.Double(n, kPath, "gap_tolerance", 0.0, 1.0, &d.gap_tolerance);
  r.Unsigned32(n, kPath, "max_history_ops", 1024, 1u << 28, &d.max_history_ops);
  r.StringList(n, kPath, "boundary_patterns", &d.boundary_patterns);
}

void ReadPolicy(ConfigReader& r, const YAML::Node& n, ServiceConfig* c) {
  static constexpr const char* kPath = "policy";
  if (!n.IsDefined() ||
      !r.CheckMap(
          n, kPath,
          {"size_weight", "prefetch_margin", "host_bandwidth_bytes_per_s",
           "device_to_host_bytes_per_s", "host_to_device_bytes_per_s", "link_efficiency",
           "full_duplex", "min_swap_bytes", "cross_iteration", "layers_per_phase", "chunk_bytes",
           "reserve_bytes", "reserve_feedback", "remembered_plans", "predict_switches"})) {
    return;
  }
  policy::GeneratorOptions& p = c->daemon.policy;
  r.Double(n, kPath, "size_weight", 0.0, 100.0, &p.size_weight);
  r.Double(n, kPath, "prefetch_margin", 0.0, 1.0, &p.prefetch_margin);
  r.Double(n, kPath, "host_bandwidth_bytes_per_s", 0.0, 1e13, &p.host_bandwidth_bytes_per_s,
           /*exclusive_min=*/true);
  // 0 = unset: host_bandwidth_bytes_per_s, unless the node topology knows the client's link.
  r.Double(n, kPath, "device_to_host_bytes_per_s", 0.0, 1e13, &p.device_to_host_bytes_per_s);
  r.Double(n, kPath, "host_to_device_bytes_per_s", 0.0, 1e13, &p.host_to_device_bytes_per_s);
  r.Double(n, kPath, "link_efficiency", 0.0, 1.0, &p.link_efficiency, /*exclusive_min=*/true);
  r.Bool(n, kPath, "full_duplex", &p.full_duplex);
  r.Bytes(n, kPath, "min_swap_bytes", 0, &p.min_swap_bytes);
  r.Bool(n, kPath, "cross_iteration", &p.cross_iteration);
  r.Unsigned32(n, kPath, "layers_per_phase", 0, 4096, &p.layers_per_phase);
  r.Bytes(n, kPath, "chunk_bytes", 0, &p.chunk_bytes);
  r.Bytes(n, kPath, "reserve_bytes", 0, &p.reserve_bytes);
  r.Bool(n, kPath, "reserve_feedback", &c->daemon.reserve_feedback);
  r.Unsigned32(n, kPath, "remembered_plans", 0, 1024, &c->daemon.remembered_plans);
  r.Bool(n, kPath, "predict_switches", &c->daemon.predict_switches);
}

void ReadDevices(ConfigReader& r, const YAML::Node& n, ServiceConfig* c) {
  if (!n.IsDefined()) return;
  if (!n.IsSequence()) {
    r.Error("devices",
            "expected a list of {index, memory_limit} maps, got " + ConfigReader::Describe(n));
    return;
  }
  std::vector<DeviceLimit> limits;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string path = "devices[" + std::to_string(i) + "]";
    if (!r.CheckMap(n[i], path, {"index", "memory_limit"})) continue;
    DeviceLimit limit;
    if (!n[i]["index"].IsDefined()) r.Error(path + ".index", "required key is missing");
    if (!n[i]["memory_limit"].IsDefined()) {
      r.Error(path + ".memory_limit", "required key is missing");
    }
    r.Unsigned32(n[i], path, "index", 0, 1023, &limit.index);
    r.Bytes(n[i], path, "memory_limit", 1, &limit.limit_bytes);
    limits.push_back(limit);
  }
  c->daemon.device_limits = std::move(limits);
}

void ReadLog(ConfigReader& r, const YAML::Node& n, ServiceConfig* c) {
  if (!n.IsDefined() || !r.CheckMap(n, "log", {"level"})) return;
  r.String(n, "log", "level", &c->log_level);
}

void ReadDocument(ConfigReader& r, const YAML::Node& root, ServiceConfig* c) {
  if (root.IsNull() || !root.IsDefined()) return;  // an empty file: all defaults
  if (!r.CheckMap(
          root, "",
          {"socket", "metrics", "clients", "detection", "policy", "devices", "log", "lending"})) {
    return;
  }
  ReadSocket(r, root["socket"], c);
  ReadMetrics(r, root["metrics"], c);
  ReadClients(r, root["clients"], c);
  ReadDetection(r, root["detection"], c);
  ReadPolicy(r, root["policy"], c);
  ReadDevices(r, root["devices"], c);
  detail::ReadLending(r, root["lending"], &c->daemon.lending);
  ReadLog(r, root["log"], c);
}

// "HOST:PORT" with PORT in [0, 65535]; an IPv6 host is written in brackets ("[::1]:9464").
bool ValidListen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::string port = listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  if (std::stoul(port) > 65535) return false;
  const std::string host = listen.substr(0, colon);
  if (host.front() == '[') return host.back() == ']' && host.size() > 2;
  return host.find(':') == std::string::npos;
}

// POSIX portable user/group names, as useradd accepts them by default.
bool ValidGroupName(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  if (!(std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
}

void ValidateSocket(const ServiceConfig& c, const std::string& origin,
                    std::vector<std::string>* errors) {
  const std::string& path = c.daemon.socket_path;
  constexpr std::size_t kMax = sizeof(sockaddr_un::sun_path) - 1;
  if (path.empty() || path.front() != '/' || path.size() > kMax) {
    errors->push_back(origin + ": socket.path: expected an absolute path of at most " +
                      std::to_string(kMax) + " bytes, got '" + path + "'");
  }
  if (!c.socket_group.empty() && !ValidGroupName(c.socket_group)) {
    errors->push_back(origin + ": socket.group: expected a group name ([a-z_][a-z0-9_-]*, " +
                      "at most 32 characters) or empty, got '" + c.socket_group + "'");
  }
}

void ValidateTimers(const DaemonOptions& d, const std::string& origin,
                    std::vector<std::string>* errors) {
  // Liveness is checked on the housekeeping timer from heartbeats sent every interval: a timeout
  // shorter than either would release healthy clients.
  const std::uint64_t floor_ns = std::max<std::uint64_t>(
      d.heartbeat_interval_ns, std::uint64_t(d.housekeeping_interval_ms) * 1'000'000);
  if (d.heartbeat_timeout_ns <= 2 * floor_ns) {
    errors->push_back(origin + ": clients.heartbeat_timeout_ms: expected more than twice " +
                      "max(heartbeat_interval_ms, housekeeping_interval_ms) = " +
                      std::to_string(2 * floor_ns / 1'000'000) + ", got '" +
                      std::to_string(d.heartbeat_timeout_ns / 1'000'000) + "'");
  }
}

}  // namespace

std::string ConfigResult::ErrorText() const {
  std::string text;
  for (const std::string& e : errors) text += (text.empty() ? "" : "\n") + e;
  return text;
}

void ValidateConfig(const ServiceConfig& c, const std::string& origin,
                    std::vector<std::string>* errors) {
  ValidateSocket(c, origin, errors);
  if (!c.daemon.metrics_listen.empty() && !ValidListen(c.daemon.metrics_listen)) {
    errors->push_back(origin + ": metrics.listen: expected HOST:PORT with PORT in [0, 65535] " +
                      "(IPv6 as [ADDR]:PORT) or empty to disable, got '" + c.daemon.metrics_listen +
                      "'");
  }
  ValidateTimers(c.daemon, origin, errors);
  static const std::set<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                "error", "critical", "off"};
  if (kLevels.count(c.log_level) == 0) {
    errors->push_back(origin + ": log.level: expected one of trace, debug, info, warn, error, " +
                      "critical, off, got '" + c.log_level + "'");
  }
  std::set<std::uint32_t> seen;
  for (std::size_t i = 0; i < c.daemon.device_limits.size(); ++i) {
    if (!seen.insert(c.daemon.device_limits[i].index).second) {
      errors->push_back(origin + ": devices[" + std::to_string(i) + "].index: expected a " +
                        "device index not listed before, got '" +
                        std::to_string(c.daemon.device_limits[i].index) + "' again");
    }
  }
}

ConfigResult ParseConfigText(const std::string& text, const std::string& origin,
                             const ServiceConfig& base) {
  ConfigResult result{base, {}};
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // e.mark is 0-based; editors count from 1.
    result.errors.push_back(origin + ":" + std::to_string(e.mark.line + 1) + ":" +
                            std::to_string(e.mark.column + 1) + ": not valid YAML: " + e.msg);
    return result;
  }
  ConfigReader reader(origin, &result.errors);
  ReadDocument(reader, root, &result.config);
  if (result.errors.empty()) ValidateConfig(result.config, origin, &result.errors);
  return result;
}

ConfigResult LoadConfigFile(const std::string& path, const ServiceConfig& base) {
  std::ifstream in(path);
  if (!in) {
    return ConfigResult{base, {path + ": cannot read the config file: " + std::strerror(errno)}};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseConfigText(text.str(), path, base);
}

}  // namespace chameleon::daemon
