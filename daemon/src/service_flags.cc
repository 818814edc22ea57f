#include "chameleon/daemon/service_flags.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <sstream>

namespace chameleon::daemon {

namespace {

/// A flag and the config key it overrides.
struct FlagSpec {
  const char* flag;
  const char* section;
  const char* key;
  const char* help;
};

constexpr FlagSpec kFlags[] = {
    {"--socket", "socket", "path", "UNIX socket clients and chameleonctl connect to"},
    {"--socket-mode", "socket", "mode", "Permissions of the socket file (octal, e.g. 0660)"},
    {"--socket-group", "socket", "group", "Group owning the socket ('' = daemon's own group)"},
    {"--metrics-listen", "metrics", "listen",
     "HOST:PORT of the Prometheus endpoint; port 0 picks a free one; '' disables"},
    {"--max-clients", "clients", "max", "Client processes served at once"},
    {"--drain-interval-ms", "clients", "drain_interval_ms", "Ring drain period"},
    {"--heartbeat-timeout-ms", "clients", "heartbeat_timeout_ms",
     "A client whose heartbeat is older than this is released"},
    {"--stage-m", "detection", "stage_m", "WARMUP -> GEN_POLICY after more than m stable steps"},
    {"--stage-n", "detection", "stage_n", "GEN_POLICY -> STABLE after more than n stable steps"},
    {"--similarity", "detection", "similarity_threshold",
     "Stable step: bigram cosine similarity above this"},
    {"--length-change", "detection", "length_change_threshold",
     "Stable step: relative length change below this"},
    {"--log-level", "log", "level", "trace, debug, info, warn, error, critical, off"},
};
constexpr const char* kPatternFlag = "--boundary-pattern";

/// The flags' values as strings, so they go through the file's reader and its messages.
struct FlagValues {
  std::string config;
  bool config_given = false;
  std::map<std::string, std::string> scalars;  // by flag
  std::vector<std::string> patterns;
  bool patterns_given = false;
};

std::string OverlayYaml(const FlagValues& flags) {
  std::map<std::string, std::map<std::string, std::string>> sections;
  for (const FlagSpec& spec : kFlags) {
    auto it = flags.scalars.find(spec.flag);
    if (it != flags.scalars.end()) sections[spec.section][spec.key] = it->second;
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [section, keys] : sections) {
    out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    for (const auto& [key, value] : keys) {
      // Quoted, so a value such as "null" or "~" stays the string the user typed.
      out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
    }
    if (section == "detection" && flags.patterns_given) {
      out << YAML::Key << "boundary_patterns" << YAML::Value << YAML::BeginSeq;
      for (const std::string& p : flags.patterns) out << YAML::DoubleQuoted << p;
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  if (flags.patterns_given && sections.count("detection") == 0) {
    out << YAML::Key << "detection" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "boundary_patterns" << YAML::Value << YAML::BeginSeq;
    for (const std::string& p : flags.patterns) out << YAML::DoubleQuoted << p;
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndMap;
  return out.c_str();
}

// "command line: detection.stage_m: ..." -> "command line: --stage-m (detection.stage_m): ...".
void NameFlags(std::vector<std::string>* errors) {
  static const std::string kOrigin = "command line: ";
  for (std::string& e : *errors) {
    if (e.rfind(kOrigin, 0) != 0) continue;
    for (const FlagSpec& spec : kFlags) {
      const std::string path = std::string(spec.section) + "." + spec.key;
      if (e.compare(kOrigin.size(), path.size() + 1, path + ":") == 0) {
        e.insert(kOrigin.size(), std::string(spec.flag) + " (");
        e.insert(kOrigin.size() + std::string(spec.flag).size() + 2 + path.size(), ")");
        break;
      }
    }
    if (e.find("detection.boundary_patterns") != std::string::npos) {
      e.insert(kOrigin.size(), std::string(kPatternFlag) + ": ");
    }
  }
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

/// Builds the CLI, parses; on --help or a syntax error fills exit_code and message.
FlagValues ParseFlags(const std::vector<std::string>& args, CommandLine* cmd) {
  FlagValues flags;
  CLI::App app{"chameleond: the Chameleon node daemon (docs/operations.md)"};
  app.add_option("--config", flags.config,
                 std::string("YAML config file ('' = none; default ") + kDefaultConfigPath +
                     " when it exists)");
  std::vector<std::pair<const FlagSpec*, CLI::Option*>> options;
  std::map<std::string, std::string> values;
  for (const FlagSpec& spec : kFlags) {
    options.emplace_back(&spec, app.add_option(spec.flag, values[spec.flag], spec.help));
  }
  CLI::Option* patterns =
      app.add_option(kPatternFlag, flags.patterns,
                     "fnmatch pattern on kernel names marking the iteration boundary (repeatable)");
  app.add_flag("--print-config", cmd->print_config, "Print the merged configuration and exit");
  app.add_flag("--check-config", cmd->check_config, "Validate the configuration and exit");
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    cmd->exit_code = app.exit(e, out, err) == 0 ? 0 : 2;
    cmd->message = out.str() + err.str();
    return flags;
  }
  flags.config_given = app.count("--config") > 0;
  for (const auto& [spec, option] : options) {
    if (option->count() > 0) flags.scalars[spec->flag] = values[spec->flag];
  }
  flags.patterns_given = patterns->count() > 0;
  return flags;
}

}  // namespace

CommandLine ParseCommandLine(const std::vector<std::string>& args,
                             const std::string& default_config_path) {
  CommandLine cmd;
  const FlagValues flags = ParseFlags(args, &cmd);
  if (cmd.exit_code >= 0) return cmd;
  if (flags.config_given) {
    cmd.config_path = flags.config;
  } else if (FileExists(default_config_path)) {
    cmd.config_path = default_config_path;
  }
  ConfigResult file{ServiceConfig{}, {}};
  if (!cmd.config_path.empty()) file = LoadConfigFile(cmd.config_path);
  if (!file.ok()) {
    cmd.exit_code = 2;
    cmd.message = file.ErrorText();
    return cmd;
  }
  ConfigResult merged = ParseConfigText(OverlayYaml(flags), "command line", file.config);
  NameFlags(&merged.errors);
  if (!merged.ok()) {
    cmd.exit_code = 2;
    cmd.message = merged.ErrorText();
    return cmd;
  }
  cmd.config = std::move(merged.config);
  return cmd;
}

std::vector<std::string> ChangedKeys(const ServiceConfig& before, const ServiceConfig& after) {
  // Compare the two in the file's schema: every key the file can set, no field forgotten.
  std::map<std::string, std::string> a, b;
  auto flatten = [](const ServiceConfig& c, std::map<std::string, std::string>* out) {
    const YAML::Node root = YAML::Load(ToYaml(c));
    for (const auto& section : root) {
      const std::string name = section.first.Scalar();
      if (!section.second.IsMap()) {
        (*out)[name] = YAML::Dump(section.second);
        continue;
      }
      for (const auto& kv : section.second) {
        (*out)[name + "." + kv.first.Scalar()] = YAML::Dump(kv.second);
      }
    }
  };
  flatten(before, &a);
  flatten(after, &b);
  std::vector<std::string> changed;
  for (const auto& [key, value] : b) {
    if (a[key] != value) changed.push_back(key);
  }
  return changed;
}

ReloadResult ReloadConfig(const std::vector<std::string>& args, const ServiceConfig& current,
                          const std::string& default_config_path) {
  ReloadResult result;
  CommandLine cmd = ParseCommandLine(args, default_config_path);
  if (cmd.exit_code >= 0) {
    result.config = current;
    std::istringstream lines(cmd.message.empty() ? "invalid command line" : cmd.message);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) result.errors.push_back(line);
    }
    return result;
  }
  result.applied = true;
  result.changed = ChangedKeys(current, cmd.config);
  for (const std::string& key : result.changed) {
    const bool restart =
        key.rfind("socket.", 0) == 0 || key == "metrics.listen" || key == "clients.max";
    if (restart) result.needs_restart.push_back(key);
  }
  result.config = std::move(cmd.config);
  // Settings that need a restart keep their running values, so what the daemon reports stays
  // what it really does.
  result.config.daemon.socket_path = current.daemon.socket_path;
  result.config.daemon.socket_mode = current.daemon.socket_mode;
  result.config.socket_group = current.socket_group;
  result.config.daemon.metrics_listen = current.daemon.metrics_listen;
  result.config.daemon.max_clients = current.daemon.max_clients;
  return result;
}

}  // namespace chameleon::daemon
