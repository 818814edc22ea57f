// chameleond's command line, merged over its config file, and SIGHUP reloads.
//
// The merge rule: defaults < config file < flags. A flag given on the command line replaces the
// whole key it maps to (--boundary-pattern given twice replaces the file's list with those two)
// and keeps winning after every reload, because a reload re-reads the file and re-applies the
// same saved arguments. Flags are validated by the same reader as the file, so a bad flag is
// named with its key path: "command line: --stage-m (detection.stage_m): expected an integer in
// [0, 1000], got 'two'".
//
// Which file: --config FILE (must exist and be valid); --config '' (no file); without --config,
// /etc/chameleon/chameleond.yaml when it exists (its absence is not an error: the daemon runs
// with no configuration at all).
#pragma once

#include <string>
#include <vector>

#include "chameleon/daemon/config_file.h"

namespace chameleon::daemon {

/// What chameleond's main should do after reading its arguments. Plain value type.
struct CommandLine {
  ServiceConfig config;       ///< valid when exit_code < 0
  std::string config_path;    ///< the file read, "" when none
  bool print_config = false;  ///< --print-config: print the merged YAML and exit 0
  bool check_config = false;  ///< --check-config: validate, print "ok" or the errors, exit
  /// >= 0: exit now with this code after printing `message` (help: 0, errors: 2).
  int exit_code = -1;
  std::string message;  ///< help text or error lines
};

/// Parses arguments (without argv[0]); `default_config_path` is where the file is looked for
/// without --config (tests point it at a scratch path).
CommandLine ParseCommandLine(const std::vector<std::string>& args,
                             const std::string& default_config_path = kDefaultConfigPath);

/// Result of a SIGHUP reload.
struct ReloadResult {
  bool applied = false;  ///< false: the new configuration was invalid and `config` is the old one
  ServiceConfig config;  ///< what to run with from now on
  std::vector<std::string> errors;   ///< why it was rejected (one line each)
  std::vector<std::string> changed;  ///< key paths whose value changed ("detection.stage_m")
  /// Changed keys that only take effect on restart (socket.*, metrics.listen, clients.max):
  /// `config` keeps their running values; the supervisor logs each once as a warning. Every
  /// other key is applied live (Daemon::UpdateOptions).
  std::vector<std::string> needs_restart;
};

/// Re-reads the config file and re-applies the saved arguments over it. An invalid file keeps
/// `current` (applied = false) so a typo in a reload never takes a running daemon down.
ReloadResult ReloadConfig(const std::vector<std::string>& args, const ServiceConfig& current,
                          const std::string& default_config_path = kDefaultConfigPath);

/// Key paths (in the file's schema, sorted) whose values differ between two configurations.
std::vector<std::string> ChangedKeys(const ServiceConfig& before, const ServiceConfig& after);

}  // namespace chameleon::daemon
