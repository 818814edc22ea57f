// chameleond: the node daemon. Runs with no configuration at all; every flag has a default.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "chameleon/daemon/daemon.h"

int main(int argc, char** argv) {
  using chameleon::daemon::DaemonOptions;
  DaemonOptions options;
  options.handle_signals = true;
  std::string log_level = "info";
  std::uint64_t heartbeat_timeout_ms = options.heartbeat_timeout_ns / 1'000'000;

  CLI::App app{"chameleond: the Chameleon node daemon (docs/daemon.md)"};
  app.add_option("--socket", options.socket_path, "UNIX socket clients and chameleonctl connect to")
      ->capture_default_str();
  app.add_option("--socket-mode", options.socket_mode, "Permissions of the socket file (octal)")
      ->capture_default_str();
  app.add_option("--metrics-listen", options.metrics_listen,
                 "HOST:PORT of the Prometheus endpoint; port 0 picks a free one; '' disables")
      ->capture_default_str();
  app.add_option("--max-clients", options.max_clients, "Client processes served at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--stage-m", options.detection.stage_m,
                 "WARMUP -> GEN_POLICY after more than m stable steps")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--stage-n", options.detection.stage_n,
                 "GEN_POLICY -> STABLE after more than n stable steps")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--similarity", options.detection.similarity_threshold,
                 "Stable step: bigram cosine similarity above this")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--length-change", options.detection.length_change_threshold,
                 "Stable step: relative length change below this")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--boundary-pattern", options.detection.boundary_patterns,
                 "fnmatch pattern on kernel names marking the iteration boundary (repeatable)");
  app.add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms,
                 "A client whose heartbeat is older than this is released")
      ->capture_default_str()
      ->check(CLI::Range(100u, 3'600'000u));
  app.add_option("--drain-interval-ms", options.drain_interval_ms, "Ring drain period")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  options.heartbeat_timeout_ns = heartbeat_timeout_ms * 1'000'000;
  spdlog::set_level(spdlog::level::from_str(log_level));
  signal(SIGPIPE, SIG_IGN);
  try {
    chameleon::daemon::Daemon daemon(options);
    daemon.Start();
    return daemon.Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chameleond: %s\n", e.what());
    return 1;
  }
}
