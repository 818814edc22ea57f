// /etc/chameleon/chameleond.yaml: every setting of chameleond in one YAML file (yaml-cpp).
//
// Precedence, lowest first: built-in defaults (options.h) < the config file < command-line flags.
// A flag given on the command line always wins, also after a SIGHUP reload (service_flags.h).
// Validation collects every problem, each naming the key path, what was expected and what was
// found ("detection.stage_m: expected an integer in [0, 1000], got 'two'"); unknown keys are
// errors so a typo never silently falls back to a default. systemd/chameleond.yaml.example
// documents every key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/daemon/options.h"
#include "chameleon/policy/options.h"

namespace chameleon::daemon {

/// Where the packaged unit points --config.
inline constexpr const char* kDefaultConfigPath = "/etc/chameleon/chameleond.yaml";

/// Everything the config file and the flags can set: the Daemon's own options (including the
/// policy base and the per-device limits) and the two settings chameleond's main applies itself
/// (log level, socket group). Plain value type; thread-compatible.
struct ServiceConfig {
  DaemonOptions daemon;
  /// Group that owns the socket; with socket.mode 0660 only its members can connect.
  /// Empty: leave the socket owned by the daemon's primary group.
  std::string socket_group;
  std::string log_level = "info";  ///< trace, debug, info, warn, error, critical, off
};

/// Outcome of loading or validating: `errors` empty means `config` is valid.
struct ConfigResult {
  ServiceConfig config;
  std::vector<std::string> errors;  ///< one line each, "<origin>: <key path>: <problem>"

  bool ok() const { return errors.empty(); }
  /// All errors joined by newlines (what chameleond prints before exiting non-zero).
  std::string ErrorText() const;
};

/// Parses YAML text over `base` (keys absent from the text keep base's values). `origin` names
/// the source in error lines (the file path). An empty document is valid and changes nothing.
ConfigResult ParseConfigText(const std::string& text, const std::string& origin,
                             const ServiceConfig& base = {});

/// Reads and parses `path` over `base`. A missing or unreadable file is an error.
ConfigResult LoadConfigFile(const std::string& path, const ServiceConfig& base = {});

/// Cross-field and range checks on a complete configuration (also run on the result of flags
/// merged over a file). Appends one line per problem, prefixed by `origin`.
void ValidateConfig(const ServiceConfig& config, const std::string& origin,
                    std::vector<std::string>* errors);

/// The configuration as YAML in the file's own schema (round-trips through ParseConfigText).
std::string ToYaml(const ServiceConfig& config);

}  // namespace chameleon::daemon
