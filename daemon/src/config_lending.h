// The config file's `lending` section (node placement and peer-HBM leases): read with its
// validation, and written back for `--print-config`. Internal to config_file.cc / config_yaml.cc.
#pragma once

#include <yaml-cpp/yaml.h>

#include "chameleon/daemon/options.h"
#include "config_reader.h"

namespace chameleon::daemon::detail {

/// Reads `lending` (absent: `out` unchanged). Errors go to the reader, one line per problem.
void ReadLending(ConfigReader& reader, const YAML::Node& node, LendingOptions* out);
/// Emits `lending` in the schema ReadLending reads.
void EmitLending(YAML::Emitter& out, const LendingOptions& lending);

}  // namespace chameleon::daemon::detail
