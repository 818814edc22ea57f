// chameleon-probe's command line, validated (untrusted input): sizes by the one byte-size
// grammar, bounded trial counts, device lists checked against the machine later. Pure parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chameleon::probe {

/// What to measure. Plain value type.
struct ProbeOptions {
  std::uint64_t bytes = 64ull << 20;  ///< --bytes: size of each copy (default 64 MiB)
  int trials = 10;                    ///< --trials: copies and VMM calls timed per figure
  std::vector<int> devices;           ///< --devices 0,1,...; empty = every device
  bool yaml = false;  ///< --yaml: SIMGPU_TOPOLOGY YAML on stdout instead of the table
  bool help = false;
};

/// `error` is empty on success, else one line for the user (exit 2).
struct ParsedProbeOptions {
  ProbeOptions options;
  std::string error;
};

inline constexpr int kMaxTrials = 100000;
inline constexpr std::uint64_t kMaxBytes = 16ull << 30;  ///< one pinned buffer per NUMA node

ParsedProbeOptions ParseProbeOptions(int argc, const char* const* argv);

/// "" when every entry of `devices` is in [0, count) and none repeats, else the error.
std::string CheckDevices(const std::vector<int>& devices, int count);

const char* ProbeUsage();

}  // namespace chameleon::probe
