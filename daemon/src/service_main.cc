#include "chameleon/daemon/service_main.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "chameleon/daemon/daemon.h"
#include "chameleon/daemon/service_flags.h"
#include "chameleon/daemon/service_supervisor.h"
#include "chameleon/daemon/socket_group.h"
#include "chameleon/daemon/systemd_notify.h"

namespace chameleon::daemon {

namespace {

int Serve(const std::vector<std::string>& args, const CommandLine& cmd) {
  DaemonOptions options = cmd.config.daemon;
  options.handle_signals = false;  // the supervisor reads SIGTERM/SIGINT from its signalfd
  Daemon daemon(options);
  daemon.Start();
  const std::string group_error = ApplySocketGroup(options.socket_path, cmd.config.socket_group);
  if (!group_error.empty()) spdlog::warn("socket access: {}", group_error);
  ServiceSupervisor::Hooks hooks;
  hooks.stop = [&daemon] { daemon.Stop(); };
  // The supervisor applied the log level and kept the restart-only keys at their running values
  // (logged once each); everything else goes to the loop (Daemon::UpdateOptions).
  hooks.apply = [&daemon](const ServiceConfig& next) {
    DaemonOptions options = next.daemon;
    options.handle_signals = false;
    if (!daemon.UpdateOptions(std::move(options))) {
      spdlog::warn("reload: the daemon is stopping; configuration not applied");
    }
  };
  ServiceSupervisor supervisor(args, cmd.config, hooks);
  if (!supervisor.Start()) return 1;
  NotifyReady("serving " + options.socket_path);
  const int rc = daemon.Run();
  if (!supervisor.stop_requested()) NotifyStopping();
  supervisor.Stop();
  return rc;
}

}  // namespace

int RunChameleond(int argc, char** argv) {
  // First, before any thread exists, so every thread inherits the mask.
  ServiceSupervisor::BlockServiceSignals();
  const std::vector<std::string> args(argv + 1, argv + argc);
  const CommandLine cmd = ParseCommandLine(args);
  if (cmd.exit_code >= 0) {
    std::FILE* out = cmd.exit_code == 0 ? stdout : stderr;
    std::fputs(cmd.message.c_str(), out);
    if (!cmd.message.empty() && cmd.message.back() != '\n') std::fputc('\n', out);
    return cmd.exit_code;
  }
  if (cmd.check_config) {
    std::printf("%s: configuration is valid\n", cmd.config_path.empty()
                                                    ? "(built-in defaults and flags)"
                                                    : cmd.config_path.c_str());
    return 0;
  }
  if (cmd.print_config) {
    std::fputs(ToYaml(cmd.config).c_str(), stdout);
    return 0;
  }
  ConfigureServiceLogging(cmd.config.log_level);
  if (!cmd.config_path.empty()) spdlog::info("configuration from {}", cmd.config_path);
  signal(SIGPIPE, SIG_IGN);
  try {
    return Serve(args, cmd);
  } catch (const std::exception& e) {
    spdlog::error("chameleond: {}", e.what());
    return 1;
  }
}

}  // namespace chameleon::daemon
