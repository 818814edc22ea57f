// chameleonctl: inspect and steer a running chameleond over its UNIX socket.
//   chameleonctl [--socket PATH] [--json] status | clients | client ID | dump-profile ID FILE |
//                disable ID | enable ID | leases | metrics | topology
// --json may appear anywhere on the line. Exit status: 0 ok, 1 the daemon said no or is not
// reachable, 2 usage error.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "chameleon/cli/guarded_main.h"
#include "chameleon/control/control_client.h"
#include "chameleon/ipc/constants.h"
#include "client_view.h"
#include "table.h"
#include "topology_view.h"

namespace {

using chameleon::ctl::Cell;
using chameleon::ctl::PrintObject;
using chameleon::ctl::PrintTable;
using nlohmann::json;

void PrintClients(const json& clients) {
  std::vector<std::vector<std::string>> rows{{"ID", "SLOT", "PID", "UID", "STAGE", "ITER_OPS",
                                              "ITER_S", "ITERATIONS", "SHIFTS", "GENERATION",
                                              "DISABLED"}};
  for (const json& c : clients) {
    rows.push_back({Cell(c["id"]), Cell(c["slot"]), Cell(c["pid"]), Cell(c["uid"]),
                    Cell(c["stage"]), Cell(c["iteration_ops"]), Cell(c["iteration_s"]),
                    Cell(c["iterations"]), Cell(c["shifts"]), Cell(c["generation"]),
                    c["disabled"].get<bool>() ? "yes" : "no"});
  }
  PrintTable(std::cout, rows);
}

/// `leases`: one line per lease, then the revocation counts and the placement's cost.
void PrintLeases(const json& reply) {
  std::vector<std::vector<std::string>> rows{
      {"LEASE", "GPU", "OWNER", "LESSEE", "BYTES", "STATE", "OMITTED_BY"}};
  for (const json& l : reply["leases"]) {
    rows.push_back({Cell(l["id"]), Cell(l["gpu"]), Cell(l["owner"]), Cell(l["lessee"]),
                    Cell(l["bytes"]), Cell(l["state"]), Cell(l["omitted_generation"])});
  }
  PrintTable(std::cout, rows);
  std::cout << "revocations: " << Cell(reply["revocations"]["completed"]) << " completed, "
            << Cell(reply["revocations"]["hung"]) << " hung\n"
            << "placement cost: " << Cell(reply["placement"]["cost_s"]) << " s";
  const std::string error = reply["placement"]["error"].get<std::string>();
  std::cout << (error.empty() ? "" : " (" + error + ")") << '\n';
}

/// Prints a successful reply in text form.
void PrintText(const std::string& command, const json& reply) {
  if (command == "status") {
    PrintObject(std::cout, reply["daemon"]);
  } else if (command == "clients") {
    PrintClients(reply["clients"]);
  } else if (command == "client") {
    chameleon::ctl::PrintClient(std::cout, reply["client"]);
  } else if (command == "leases") {
    PrintLeases(reply);
  } else if (command == "metrics") {
    std::cout << reply["text"].get<std::string>();
  } else if (command == "topology") {
    chameleon::ctl::PrintTopology(std::cout, reply["topology"]);
  } else if (command == "disable" || command == "enable") {
    std::cout << "client " << Cell(reply["client"]) << ' ' << command << "d\n";
  }
}

/// The whole command; main() only turns an exception (a reply of an unexpected shape) into exit 1.
int Run(int argc, char** argv) {
  std::string socket = chameleon::ipc::kDefaultSocketPath;
  bool as_json = false;
  std::uint32_t id = 0;
  std::string file;
  CLI::App app{"chameleonctl: inspect and steer chameleond (docs/daemon.md)"};
  app.require_subcommand(1);
  app.fallthrough();  // --json and --socket also after the command
  app.add_option("--socket", socket, "The daemon's UNIX socket")->capture_default_str();
  app.add_flag("--json", as_json, "Print the daemon's JSON reply instead of a table");
  app.add_subcommand("status", "The daemon: version, uptime, clients, bad-input counters");
  app.add_subcommand("clients", "One line per connected client");
  app.add_subcommand("client", "Everything about one client")->add_option("id", id)->required();
  auto* dump =
      app.add_subcommand("dump-profile", "Write a client's detailed profile (JSON) to FILE");
  dump->add_option("id", id)->required();
  dump->add_option("file", file)->required();
  app.add_subcommand("disable", "Make the client's shim pass through (root or its uid only)")
      ->add_option("id", id)
      ->required();
  app.add_subcommand("enable", "Undo disable (root or the client's uid only)")
      ->add_option("id", id)
      ->required();
  app.add_subcommand("leases", "Peer-HBM leases between clients, revocations, placement cost");
  app.add_subcommand("metrics", "The Prometheus exposition, as /metrics serves it");
  app.add_subcommand("topology", "The node: GPUs and NUMA nodes, links each way, hops, provenance");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // --help is not an error; anything else is a usage error
  }

  const std::string command = app.get_subcommands().front()->get_name();
  json request{{"command", command}};
  if (command == "client" || command == "dump-profile" || command == "disable" ||
      command == "enable") {
    request["id"] = id;
  }
  json reply = chameleon::control::ControlRequest(socket, request);
  const bool ok = reply.value("ok", false);
  if (ok && command == "dump-profile") {
    std::ofstream out(file);
    out << reply["profile"].dump(1) << '\n';
    if (!out) {
      reply = {{"ok", false}, {"error", "cannot write " + file}};
    } else {
      reply = {{"ok", true},
               {"file", file},
               {"ops", reply["profile"]["ops"].size()},
               {"tensors", reply["profile"]["tensors"].size()}};
      if (!as_json)
        std::cout << "wrote " << file << " (" << Cell(reply["ops"]) << " ops, "
                  << Cell(reply["tensors"]) << " tensors)\n";
    }
  }
  if (as_json) {
    std::cout << reply.dump(2) << '\n';
  } else if (!reply.value("ok", false)) {
    std::cerr << "chameleonctl: " << reply.value("error", std::string("unknown error")) << '\n';
  } else if (command != "dump-profile") {
    PrintText(command, reply);
  }
  return reply.value("ok", false) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return chameleon::cli::GuardedMain("chameleonctl", [&] { return Run(argc, argv); });
}
