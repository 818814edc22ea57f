// Runs the user's command as a child and waits for it, forwarding the termination signals that
// are sent to chameleon-run itself (kill, a scheduler's SIGTERM) to the child. Signals a terminal
// sends to its whole foreground group (Ctrl-C) already reach the child and are not sent twice.
// One command per process (the signal handlers are process-wide); not thread-safe.
#pragma once

#include <string>
#include <vector>

namespace chameleon::run {

/// Holds SIGINT, SIGTERM, SIGHUP and SIGQUIT until RunCommand has started the command, so that
/// one arriving while a private daemon starts is forwarded to the command (which then ends and
/// the daemon is stopped) instead of killing chameleon-run and orphaning the daemon.
void BlockForwardedSignals();

/// Forks and execvp()s `command` (127 when it cannot be executed), waits for it, and returns its
/// exit status, or 128 + N when signal N ended it.
int RunCommand(const std::vector<std::string>& command);

}  // namespace chameleon::run
