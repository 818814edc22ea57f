// chameleonctl's commands, answered on the loop thread from the sessions' state.
// Request: {"command": "...", "id": N}. Reply: {"ok": true, ...} or {"ok": false, "error": "..."}.
// A reply longer than one message is sent as {"ok": true, "_parts": K} followed by K messages
// whose payloads concatenate to the real reply (docs/daemon.md).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>

#include <nlohmann/json.hpp>

#include "chameleon/daemon/node_json.h"
#include "chameleon/policy/profile_json.h"
#include "daemon_impl.h"

namespace chameleon::daemon {
namespace {

nlohmann::json Error(const std::string& text) { return {{"ok", false}, {"error", text}}; }

}  // namespace

void DaemonImpl::SendReply(Connection* conn, const std::string& json) {
  std::vector<std::uint8_t> message;
  if (json.size() <= ipc::kMaxPayloadBytes) {
    ipc::EncodeControl(ipc::MessageType::kControlReply, json, &message);
  } else {
    const std::size_t parts = (json.size() + ipc::kMaxPayloadBytes - 1) / ipc::kMaxPayloadBytes;
    ipc::EncodeControl(ipc::MessageType::kControlReply,
                       nlohmann::json{{"ok", true}, {"_parts", parts}}.dump(), &message);
    for (std::size_t i = 0; i < parts; ++i) {
      ipc::EncodeControl(
          ipc::MessageType::kControlReply,
          std::string_view(json).substr(i * ipc::kMaxPayloadBytes, ipc::kMaxPayloadBytes),
          &message);
    }
  }
  Send(conn, message);
}

void DaemonImpl::HandleControl(Connection* conn, std::string_view request) {
  nlohmann::json req = nlohmann::json::parse(request, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object() || !req.contains("command") ||
      !req["command"].is_string()) {
    metrics_.bad_input(BadInput::kBadControl).Increment();
    spdlog::warn("peer pid {}: control request is not a JSON object with a \"command\"",
                 conn->creds.pid);
    SendReply(conn, Error("request must be a JSON object with a string \"command\"").dump());
    return;
  }
  const std::string command = req["command"];
  const bool wants_client = command == "client" || command == "dump-profile" ||
                            command == "disable" || command == "enable";
  ClientSession* session = nullptr;
  if (wants_client) {
    if (!req.contains("id") || !req["id"].is_number_unsigned() ||
        req["id"].get<std::uint64_t>() > UINT32_MAX) {
      SendReply(conn, Error("'" + command + "' needs a client id").dump());
      return;
    }
    Connection* client = FindClient(req["id"].get<std::uint32_t>());
    if (client == nullptr) {
      SendReply(conn, Error("no client with id " + req["id"].dump()).dump());
      return;
    }
    session = client->session.get();
  }
  nlohmann::json reply{{"ok", true}};
  if (command == "status") {
    nlohmann::json bad;
    for (int i = 0; i < static_cast<int>(BadInput::kCount); ++i) {
      const auto reason = static_cast<BadInput>(i);
      bad[BadInputName(reason)] = static_cast<std::uint64_t>(metrics_.bad_input(reason).Value());
    }
    reply["daemon"] = {{"pid", getpid()},
                       {"version", "0.1.0"},
                       {"uptime_s", double(MonotonicNs() - started_ns_) * 1e-9},
                       {"socket", options_.socket_path},
                       {"metrics_listen", options_.metrics_listen},
                       {"metrics_port", metrics_port.load()},
                       {"clients", clients_.size()},
                       {"max_clients", options_.max_clients},
                       {"stage_m", options_.detection.stage_m},
                       {"stage_n", options_.detection.stage_n},
                       {"bad_input", bad}};
  } else if (command == "clients") {
    reply["clients"] = nlohmann::json::array();
    for (auto& [id, client] : clients_) {
      nlohmann::json j;
      client->session->Describe(false, &j);
      reply["clients"].push_back(std::move(j));
    }
  } else if (command == "client") {
    session->Describe(true, &reply["client"]);
  } else if (command == "dump-profile") {
    auto profile = session->profile();
    if (!profile) {
      SendReply(conn, Error("client " + req["id"].dump() + " has no detailed profile yet (stage " +
                            StageName(session->stage()) + ")")
                          .dump());
      return;
    }
    // Embedded as text: the profile can be large and is already JSON.
    SendReply(conn, "{\"ok\":true,\"profile\":" + policy::ProfileToJson(*profile) + "}");
    return;
  } else if (command == "disable" || command == "enable") {
    const uid_t owner = session->identity().uid;
    if (conn->creds.uid != 0 && conn->creds.uid != owner) {
      metrics_.bad_input(BadInput::kPermissionDenied).Increment();
      spdlog::warn("peer pid {} uid {}: {} client {} refused: only root or uid {} may",
                   conn->creds.pid, conn->creds.uid, command, req["id"].dump(), owner);
      SendReply(conn, Error("permission denied: client " + req["id"].dump() + " belongs to uid " +
                            std::to_string(owner))
                          .dump());
      return;
    }
    session->SetDisabled(command == "disable");
    spdlog::info("client {} {}d by uid {}", req["id"].dump(), command, conn->creds.uid);
    reply["client"] = req["id"];
    reply["disabled"] = command == "disable";
  } else if (command == "topology") {
    reply["topology"] = NodeViewToJson(node_view_);
  } else if (command == "leases") {
    node_.Describe(&reply);
  } else if (command == "metrics") {
    reply["text"] = metrics_.Serialize();
    reply["metrics_port"] = metrics_port.load();
  } else {
    metrics_.bad_input(BadInput::kBadControl).Increment();
    SendReply(conn, Error("unknown command '" + command +
                          "' (status, clients, client, dump-profile, disable, enable, leases, "
                          "metrics, topology)")
                        .dump());
    return;
  }
  SendReply(conn, reply.dump());
}

}  // namespace chameleon::daemon
