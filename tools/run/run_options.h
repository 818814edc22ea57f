// chameleon-run's command line: `chameleon-run [--limit BYTES] [--socket PATH] -- <command...>`.
// Pure parsing, no side effects, so tests can check every rule without starting anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chameleon::run {

/// What the user asked for. Plain value type.
struct RunOptions {
  std::optional<std::uint64_t> limit;  ///< --limit, in bytes (CHAMELEON_DEVICE_LIMIT)
  std::string socket;                  ///< --socket; empty = CHAMELEON_SOCKET or the node default
  std::vector<std::string> command;    ///< everything after "--" (or the first non-option)
  bool help = false;                   ///< -h / --help
};

/// Result of ParseRunOptions: `error` is empty on success, else one line for the user (exit 2).
struct ParsedRunOptions {
  RunOptions options;
  std::string error;
};

/// Parses argv[1..argc). --limit takes the one byte-size grammar (chameleon/ipc/byte_size.h) and
/// must be > 0; a command is required unless --help is given.
ParsedRunOptions ParseRunOptions(int argc, const char* const* argv);

/// The usage text printed by --help and after a usage error.
const char* RunUsage();

}  // namespace chameleon::run
