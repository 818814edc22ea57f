// Whether a process that wrote its pid into a shared file is still the same, running process:
// its start time from /proc/<pid>/stat tells a live owner from a later process that reused the
// pid. Stateless functions; thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace chameleon::simgpu {

/// What /proc says about a pid.
struct ProcessStatus {
  bool running = false;          ///< exists and is neither a zombie nor dead
  std::uint64_t start_time = 0;  ///< field 22 of /proc/<pid>/stat (clock ticks since boot)
};

/// Reads /proc/<pid>/stat. A pid that does not exist, a zombie (its memory is gone, only its exit
/// status waits for the parent) and an unreadable or malformed file all read as not running.
ProcessStatus ReadProcessStatus(pid_t pid);

/// Parses the text of a /proc/<pid>/stat file (the command may hold spaces and parentheses, so
/// the fields are counted from the last ')'). False if malformed.
bool ParseProcStat(const char* text, std::size_t len, ProcessStatus* out);

}  // namespace chameleon::simgpu
