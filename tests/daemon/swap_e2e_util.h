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
/// The exit record of the shim's CHAMELEON_STATS_FILE at `stats_path` as a map: "limit" and
/// every executor counter's total (the names of the CHAMELEON_DEBUG=stats line); empty if absent.
std::map<std::string, std::uint64_t> ExecutorStats(const std::string& stats_path);

/// One iteration the executor closed (an "iteration" record of the stats file): its index, the
/// policy generation in force during it, and the swap totals at its end.
struct Boundary {
  std::uint64_t index = 0, generation = 0, out_bytes = 0, in_bytes = 0;
};
std::vector<Boundary> Boundaries(const std::string& stats_path);

/// Steps at which the trainer printed "shift at step N".
std::vector<int> Shifts(const std::string& out);

}  // namespace chameleon::daemon::testing
