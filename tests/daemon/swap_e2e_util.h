// Helpers of the swap end-to-end tests: child processes (chameleond, the trainer, the replayer)
// with a controlled environment, and parsers for what they print.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace chameleon::daemon::testing {

/// A child process whose stdout and stderr go to files.
struct Child {
  pid_t pid = -1;
  std::string out_path, err_path;
};

/// Starts `argv` with the test's environment minus every LD_PRELOAD, LD_LIBRARY_PATH,
/// CHAMELEON_* and SIMGPU_* variable, plus `env` ("NAME=value").
Child Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& out_path, const std::string& err_path);
/// Waits for the child; returns its wait status.
int Wait(const Child& child);
/// True (and the status) once the child has exited; never blocks.
bool Exited(const Child& child, int* status);
std::string ReadFile(const std::string& path);

/// What a trainer or replay run printed.
struct RunOutput {
  int status = -1;
  std::string out, err;
};
RunOutput Finish(const Child& child);

/// "step N loss X" (trainer) or "iteration N" (replay: no loss, the lines carry only time) lines,
/// without their simulated time, which legitimately changes with swapping.
std::vector<std::string> ResultLines(const std::string& out);
/// The `checksum` value, or "" when missing.
std::string Checksum(const std::string& out);
/// A `<key> <digits>` value from the output (e.g. "peak"), or 0.
std::uint64_t Number(const std::string& text, const std::string& key);
/// The trainer's simgpu physical high-water mark (stderr), or UINT64_MAX when it did not print
/// one (so a missing line fails a `<=` check).
std::uint64_t HighWater(const std::string& err);
/// The shim's exit line "executor: k=v ..." (CHAMELEON_DEBUG=stats; stderr, or the shim's log
/// file when CHAMELEON_LOG_FILE is set) as a map; empty if absent.
std::map<std::string, std::uint64_t> ExecutorStats(const std::string& err);

/// One "executor boundary N: generation G, totals: out X in Y bytes ..." line of the shim's log
/// (CHAMELEON_LOG_LEVEL=debug).
struct Boundary {
  std::uint64_t index = 0, generation = 0, out_bytes = 0, in_bytes = 0;
};
std::vector<Boundary> Boundaries(const std::string& log);

/// Steps at which the trainer printed "shift at step N".
std::vector<int> Shifts(const std::string& out);

}  // namespace chameleon::daemon::testing
