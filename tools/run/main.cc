// chameleon-run: a user's single line to train under Chameleon (docs/operations.md "One job").
//   chameleon-run [--limit BYTES] [--socket PATH] -- <command...>
// Sets LD_PRELOAD and CHAMELEON_DEVICE_LIMIT, uses the node's chameleond or a private one for
// the command's lifetime, says on stderr where the metrics are, exits with the command's status.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "chameleon/cli/guarded_main.h"
#include "chameleon/control/control_client.h"
#include "command_runner.h"
#include "install_paths.h"
#include "private_daemon.h"
#include "run_options.h"

namespace {

using chameleon::run::RunOptions;

constexpr const char* kNodeSocket = "/run/chameleon/chameleond.sock";  // docs/operations.md

// The daemon's `status` reply at `socket`, or a reply with ok=false when none answers.
nlohmann::json Status(const std::string& socket) {
  return chameleon::control::ControlRequest(socket, {{"command", "status"}}, 2000);
}

// "http://host:port/metrics" from the "daemon" object of a status reply ("" when the daemon serves
// no metrics).
std::string MetricsUrl(const nlohmann::json& d) {
  const std::string listen = d.value("metrics_listen", "");
  const auto port = d.value("metrics_port", 0);
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || port == 0) return "";
  return "http://" + listen.substr(0, colon) + ":" + std::to_string(port) + "/metrics";
}

void SayWhere(const char* kind, const std::string& socket, const nlohmann::json& status) {
  // The reply is the daemon's: read it defensively (a missing or mistyped field prints as none).
  const nlohmann::json d = status.contains("daemon") && status["daemon"].is_object()
                               ? status["daemon"]
                               : nlohmann::json::object();
  std::string url;
  int pid = 0;
  try {
    url = MetricsUrl(d);
    pid = d.value("pid", 0);
  } catch (const nlohmann::json::exception&) {
    url.clear();
  }
  std::fprintf(stderr,
               "chameleon-run: %s chameleond (pid %d) at %s; metrics: %s, or chameleonctl --socket "
               "%s metrics\n",
               kind, pid, socket.c_str(), url.empty() ? "none" : url.c_str(), socket.c_str());
}

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "chameleon-run: %s\n", message.c_str());
  return code;
}

int Run(int argc, char** argv) {
  const auto parsed = chameleon::run::ParseRunOptions(argc, argv);
  if (parsed.options.help) {
    std::fputs(chameleon::run::RunUsage(), stdout);
    return 0;
  }
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "chameleon-run: %s\n%s", parsed.error.c_str(), chameleon::run::RunUsage());
    return 2;
  }
  const RunOptions& opt = parsed.options;
  chameleon::run::BlockForwardedSignals();
  const std::string exe_dir = chameleon::run::ExecutableDir();
  const std::string shim = chameleon::run::FindShimLibrary(exe_dir);
  if (shim.empty())
    return Fail("libchameleon.so not found next to " + exe_dir + " (set CHAMELEON_LIBRARY)", 1);

  chameleon::run::PrivateDaemon private_daemon;
  const char* env_socket = std::getenv("CHAMELEON_SOCKET");
  std::string socket = !opt.socket.empty()           ? opt.socket
                       : (env_socket && *env_socket) ? env_socket
                                                     : kNodeSocket;
  if (auto status = Status(socket); status.value("ok", false)) {
    SayWhere("node", socket, status);
  } else if (!opt.socket.empty()) {
    // An explicit socket is the user's choice: the shim connects when the daemon comes up.
    std::fprintf(stderr, "chameleon-run: no chameleond answers at %s yet; running anyway\n",
                 socket.c_str());
  } else {
    const std::string daemon = chameleon::run::FindDaemon(exe_dir);
    if (daemon.empty())
      return Fail("no chameleond at " + socket + " and none next to " + exe_dir, 1);
    if (const std::string err = private_daemon.Start(daemon); !err.empty()) return Fail(err, 1);
    socket = private_daemon.socket();
    SayWhere("private", socket, Status(socket));
  }

  const char* preload = std::getenv("LD_PRELOAD");
  ::setenv("LD_PRELOAD", chameleon::run::AppendPreload(preload ? preload : "", shim).c_str(), 1);
  ::setenv("CHAMELEON_SOCKET", socket.c_str(), 1);
  if (opt.limit) ::setenv("CHAMELEON_DEVICE_LIMIT", std::to_string(*opt.limit).c_str(), 1);
  const int rc = chameleon::run::RunCommand(opt.command);
  private_daemon.Stop();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  return chameleon::cli::GuardedMain("chameleon-run", [&] { return Run(argc, argv); });
}
