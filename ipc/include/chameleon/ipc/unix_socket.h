// Blocking helpers for the UNIX socket used by the shim (from its background thread) and by
// chameleonctl. The daemon uses libuv for I/O but the same message decoders.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chameleon/ipc/socket_protocol.h"

namespace chameleon::ipc {

/// Connects to `path` with a timeout; returns the fd or -errno.
int ConnectUnix(const std::string& path, int timeout_ms);

/// Sends all of `bytes`; attaches `fd_to_pass` with SCM_RIGHTS when >= 0. 0 or -errno.
int SendWithFd(int sock, std::span<const std::uint8_t> bytes, int fd_to_pass);

/// Receives one whole message (header validated, payload <= kMaxPayloadBytes) within
/// `timeout_ms`. A passed descriptor, if any, is returned in *received_fd (else -1).
/// 0 on success; -errno on I/O error or timeout; -EPROTO on a malformed message (*error says why).
int ReceiveMessage(int sock, int timeout_ms, MessageHeader* header,
                   std::vector<std::uint8_t>* payload, int* received_fd, DecodeError* error);

/// Peer credentials of a connected UNIX socket (SO_PEERCRED).
struct PeerCredentials {
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};
int GetPeerCredentials(int sock, PeerCredentials* creds);

}  // namespace chameleon::ipc
