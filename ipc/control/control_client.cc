#include "chameleon/control/control_client.h"

#include <unistd.h>

#include <cstring>

#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/ipc/unix_socket.h"

namespace chameleon::control {
namespace {

nlohmann::json Failure(const std::string& text) { return {{"ok", false}, {"error", text}}; }

/// Receives one CONTROL_REPLY payload as text; empty optional-like false on error.
bool ReceiveReply(int sock, int timeout_ms, std::string* text, std::string* error) {
  ipc::MessageHeader header{};
  std::vector<std::uint8_t> payload;
  int fd = -1;
  ipc::DecodeError decode = ipc::DecodeError::kOk;
  const int rc = ipc::ReceiveMessage(sock, timeout_ms, &header, &payload, &fd, &decode);
  if (fd >= 0) close(fd);
  if (rc != 0) {
    *error = rc == -EPROTO ? std::string("malformed reply: ") + ipc::ToString(decode)
                           : std::string("no reply: ") + std::strerror(-rc);
    return false;
  }
  if (header.type == static_cast<std::uint16_t>(ipc::MessageType::kRefuse)) {
    ipc::RefuseReason reason{};
    std::string why;
    ipc::DecodeRefuse(payload, &reason, &why);
    *error = "refused: " + why;
    return false;
  }
  if (header.type != static_cast<std::uint16_t>(ipc::MessageType::kControlReply)) {
    *error = "unexpected message type " + std::to_string(header.type);
    return false;
  }
  text->assign(payload.begin(), payload.end());
  return true;
}

}  // namespace

nlohmann::json ControlRequest(const std::string& socket_path, const nlohmann::json& request,
                              int timeout_ms) {
  const int sock = ipc::ConnectUnix(socket_path, timeout_ms);
  if (sock < 0) {
    return Failure("cannot connect to " + socket_path + ": " + std::strerror(-sock));
  }
  std::vector<std::uint8_t> message;
  ipc::EncodeControl(ipc::MessageType::kControlRequest, request.dump(), &message);
  std::string text, error;
  nlohmann::json reply;
  if (const int rc = ipc::SendWithFd(sock, message, -1); rc != 0) {
    reply = Failure(std::string("cannot send: ") + std::strerror(-rc));
  } else if (!ReceiveReply(sock, timeout_ms, &text, &error)) {
    reply = Failure(error);
  } else {
    reply = nlohmann::json::parse(text, nullptr, false);
    if (reply.is_object() && reply.contains("_parts") && reply["_parts"].is_number_unsigned()) {
      // A long reply: the parts concatenate to the real one.
      const auto parts = reply["_parts"].get<std::size_t>();
      std::string whole, part;
      for (std::size_t i = 0; i < parts && error.empty(); ++i) {
        if (ReceiveReply(sock, timeout_ms, &part, &error)) whole += part;
      }
      reply = error.empty() ? nlohmann::json::parse(whole, nullptr, false) : Failure(error);
    }
    if (reply.is_discarded()) reply = Failure("reply is not JSON");
  }
  close(sock);
  return reply;
}

}  // namespace chameleon::control
