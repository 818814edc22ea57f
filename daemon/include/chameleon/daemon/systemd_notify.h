// chameleond under systemd: sd_notify(3) readiness, stopping and watchdog messages (libsystemd),
// and logging that suits the journal. Every function is a harmless no-op outside systemd (no
// NOTIFY_SOCKET, no JOURNAL_STREAM), so the same binary runs from a shell, a test or a container.
// Thread-safe: sd_notify opens its own datagram socket per call and reads only the environment.
#pragma once

#include <cstdint>
#include <string>

namespace spdlog {
class logger;
}

namespace chameleon::daemon {

/// READY=1 (with STATUS= when `status` is not empty): sockets are bound, clients may connect.
/// Returns true when a message was sent to systemd, false outside systemd or on error.
bool NotifyReady(const std::string& status = "");
/// RELOADING=1 before a SIGHUP reload (follow it with NotifyReady).
bool NotifyReloading();
/// STOPPING=1 as soon as a stop is requested.
bool NotifyStopping();
/// WATCHDOG=1; send it from the event loop so a hung loop stops the pings.
bool NotifyWatchdog();
/// STATUS=... shown by `systemctl status chameleond`.
bool NotifyStatus(const std::string& status);

/// How often to send WATCHDOG=1, in microseconds: half of WatchdogSec (systemd's own advice),
/// or 0 when no watchdog is armed for this process (sd_watchdog_enabled).
std::uint64_t WatchdogPingIntervalUs();

/// True when stderr is connected to the journal: JOURNAL_STREAM names stderr's device and inode
/// (the check sd_journal_stream_fd(3) documents), not merely "the variable is set", because the
/// variable is inherited by children whose stderr was redirected elsewhere.
bool StderrIsJournal();

/// Pattern for `logger`: under the journal no timestamp (journald stamps every line) and a
/// "<N>" syslog priority prefix so `journalctl -p warning` filters; elsewhere a timestamped line.
void ApplyLogPattern(spdlog::logger& logger, bool journal);

/// Makes spdlog's default logger write to stderr with ApplyLogPattern(StderrIsJournal()) at
/// `level` (trace ... off; an unknown name means info).
void ConfigureServiceLogging(const std::string& level);

}  // namespace chameleon::daemon
