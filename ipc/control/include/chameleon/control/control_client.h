// The client side of the daemon's control protocol (chameleonctl, the daemon's supervisor and
// tests): one request, one reply, reassembled when the daemon split it into parts
// (docs/daemon.md). Blocking; thread-safe (no shared state: each call has its own socket).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace chameleon::control {

/// Sends `request` to the daemon at `socket_path` and returns its reply. On a transport error
/// returns {"ok": false, "error": "..."} with the reason (no daemon, timeout, bad reply).
nlohmann::json ControlRequest(const std::string& socket_path, const nlohmann::json& request,
                              int timeout_ms = 5000);

}  // namespace chameleon::control
