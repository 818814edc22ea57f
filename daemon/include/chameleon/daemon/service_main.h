// chameleond's whole main: the command line over the config file (service_flags.h), service
// logging, the Daemon, socket group, sd_notify READY/STOPPING and the supervisor thread (SIGHUP
// reload, SIGTERM stop, watchdog). daemon/src/main.cc only calls it; tests build the same entry
// point into their own binary.
#pragma once

namespace chameleon::daemon {

/// Runs chameleond; returns the process exit code (0 clean stop or --help, 1 runtime failure
/// such as the socket being in use, 2 invalid configuration or command line).
int RunChameleond(int argc, char** argv);

}  // namespace chameleon::daemon
