// Who a client is, as the daemon accepted it: the identity every part of its session logs with.
// A plain value; safe to read from any thread once constructed.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "chameleon/ipc/socket_protocol.h"

namespace chameleon::daemon {

/// Who the client is. pid/uid/gid come from SO_PEERCRED, never from the message.
struct ClientIdentity {
  std::uint32_t id = 0;    ///< unique for the daemon's lifetime (chameleonctl's <id>)
  std::uint32_t slot = 0;  ///< reused; the metrics' `client` label
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  ipc::Hello hello;
};

}  // namespace chameleon::daemon
