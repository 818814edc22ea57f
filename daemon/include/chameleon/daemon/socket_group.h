// Group-based access to chameleond's socket: with socket.mode 0660 and socket.group set, only
// members of that group (and root) can connect. Applied by main right after the socket is bound.
#pragma once

#include <string>

namespace chameleon::daemon {

/// chgrp `path` to `group`. Returns "" on success, else why not ("group 'gpu' does not exist",
/// "chown ...: Operation not permitted"); the daemon logs it and keeps serving, because a
/// missing group is a packaging mistake that must not stop training jobs. Thread-safe.
std::string ApplySocketGroup(const std::string& path, const std::string& group);

}  // namespace chameleon::daemon
