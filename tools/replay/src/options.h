// Command line of chameleon-replay (docs/replay.md).
#pragma once

#include <cstdint>
#include <string>

#include "allocator.h"

namespace chameleon::replay {

struct ReplayOptions {
  std::string trace;
  std::string kineto;        ///< optional Kineto file: recorded kernel durations
  std::string emit_profile;  ///< optional: write the profile of iteration 0 here
  int iterations = 5;
  int perturb_every = 0;        ///< K of --perturb K:P (0: no perturbation)
  double perturb_fraction = 0;  ///< P of --perturb K:P
  AllocStyle alloc = AllocStyle::kTensor;
  int corrupt_at_iteration = -1;  ///< test hook: flip one input byte before this iteration
  /// Bytes between sampled words. 64 KiB: every 2 MiB swap/VMM granule is sampled 32 times,
  /// while a multi-GB trace touches few enough pages to replay in seconds on a loaded host.
  std::uint32_t sample_stride = 65536;
};

/// Parses argv. Returns 0 to continue, -1 when --help was printed (exit 0), else the exit code
/// of a usage error (message on stderr).
int ParseOptions(int argc, char** argv, ReplayOptions* out);

}  // namespace chameleon::replay
