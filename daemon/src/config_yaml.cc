// ToYaml: the configuration in the file's own schema, for `chameleond --print-config` and the
// round-trip test that keeps the reader and the documented schema in step.
#include <yaml-cpp/yaml.h>

#include <cstdio>

#include "chameleon/daemon/config_file.h"
#include "config_lending.h"

namespace chameleon::daemon {

namespace {

void EmitSocket(YAML::Emitter& out, const ServiceConfig& c) {
  char mode[8];
  std::snprintf(mode, sizeof(mode), "0%03o", c.daemon.socket_mode & 0777u);
  out << YAML::Key << "socket" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "path" << YAML::Value << c.daemon.socket_path;
  out << YAML::Key << "mode" << YAML::Value << YAML::DoubleQuoted << mode;
  out << YAML::Key << "group" << YAML::Value << YAML::DoubleQuoted << c.socket_group;
  out << YAML::EndMap;
  out << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << YAML::DoubleQuoted << c.daemon.metrics_listen;
  out << YAML::EndMap;
}

void EmitClients(YAML::Emitter& out, const DaemonOptions& d) {
  out << YAML::Key << "clients" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max" << YAML::Value << d.max_clients;
  out << YAML::Key << "drain_interval_ms" << YAML::Value << d.drain_interval_ms;
  out << YAML::Key << "drain_batch_records" << YAML::Value << d.drain_batch_records;
  out << YAML::Key << "housekeeping_interval_ms" << YAML::Value << d.housekeeping_interval_ms;
  out << YAML::Key << "heartbeat_interval_ms" << YAML::Value << d.heartbeat_interval_ns / 1'000'000;
  out << YAML::Key << "heartbeat_timeout_ms" << YAML::Value << d.heartbeat_timeout_ns / 1'000'000;
  out << YAML::Key << "stuck_record_timeout_ms" << YAML::Value
      << d.stuck_record_timeout_ns / 1'000'000;
  out << YAML::EndMap;
}

void EmitDetection(YAML::Emitter& out, const DetectionOptions& d) {
  out << YAML::Key << "detection" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "stage_m" << YAML::Value << d.stage_m;
  out << YAML::Key << "stage_n" << YAML::Value << d.stage_n;
  out << YAML::Key << "similarity_threshold" << YAML::Value << d.similarity_threshold;
  out << YAML::Key << "length_change_threshold" << YAML::Value << d.length_change_threshold;
  out << YAML::Key << "min_periods" << YAML::Value << d.min_periods;
  out << YAML::Key << "min_period_ops" << YAML::Value << d.min_period_ops;
  out << YAML::Key << "max_gram" << YAML::Value << d.max_gram;
  out << YAML::Key << "gap_tolerance" << YAML::Value << d.gap_tolerance;
  out << YAML::Key << "max_history_ops" << YAML::Value << d.max_history_ops;
  out << YAML::Key << "boundary_patterns" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& p : d.boundary_patterns) out << YAML::DoubleQuoted << p;
  out << YAML::EndSeq << YAML::EndMap;
}

void EmitPolicy(YAML::Emitter& out, const ServiceConfig& c) {
  const policy::GeneratorOptions& p = c.daemon.policy;
  out << YAML::Key << "policy" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "size_weight" << YAML::Value << p.size_weight;
  out << YAML::Key << "prefetch_margin" << YAML::Value << p.prefetch_margin;
  out << YAML::Key << "host_bandwidth_bytes_per_s" << YAML::Value << p.host_bandwidth_bytes_per_s;
  out << YAML::Key << "device_to_host_bytes_per_s" << YAML::Value << p.device_to_host_bytes_per_s;
  out << YAML::Key << "host_to_device_bytes_per_s" << YAML::Value << p.host_to_device_bytes_per_s;
  out << YAML::Key << "link_efficiency" << YAML::Value << p.link_efficiency;
  out << YAML::Key << "full_duplex" << YAML::Value << p.full_duplex;
  out << YAML::Key << "min_swap_bytes" << YAML::Value << p.min_swap_bytes;
  out << YAML::Key << "cross_iteration" << YAML::Value << p.cross_iteration;
  out << YAML::Key << "layers_per_phase" << YAML::Value << p.layers_per_phase;
  out << YAML::Key << "chunk_bytes" << YAML::Value << p.chunk_bytes;
  out << YAML::Key << "reserve_bytes" << YAML::Value << p.reserve_bytes;
  out << YAML::Key << "reserve_feedback" << YAML::Value << c.daemon.reserve_feedback;
  out << YAML::Key << "remembered_plans" << YAML::Value << c.daemon.remembered_plans;
  out << YAML::Key << "predict_switches" << YAML::Value << c.daemon.predict_switches;
  out << YAML::EndMap;
  out << YAML::Key << "devices" << YAML::Value << YAML::BeginSeq;
  for (const DeviceLimit& d : c.daemon.device_limits) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "index" << YAML::Value << d.index
        << YAML::Key << "memory_limit" << YAML::Value << d.limit_bytes << YAML::EndMap;
  }
  out << YAML::EndSeq;
  detail::EmitLending(out, c.daemon.lending);
  out << YAML::Key << "log" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "level" << YAML::Value << c.log_level << YAML::EndMap;
}

}  // namespace

std::string ToYaml(const ServiceConfig& config) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);  // doubles survive the round trip exactly
  out << YAML::BeginMap;
  EmitSocket(out, config);
  EmitClients(out, config.daemon);
  EmitDetection(out, config.daemon.detection);
  EmitPolicy(out, config);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace chameleon::daemon
