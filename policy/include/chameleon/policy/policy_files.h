// File-writing helpers for plan explanations (target chameleon::policy_files). Kept out of
// chameleon::policy so the generator library itself stays free of I/O.
#pragma once

#include <string>

#include "chameleon/policy/generator.h"
#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// Writes the before/after memory timeline of `plan` to `path`: an SVG when `path` ends in
/// ".svg", otherwise a gnuplot script (run `gnuplot <path>`) that renders `<path>.png`.
/// Returns false and sets `*error` when the file cannot be written.
bool WriteMemoryTimelineFile(const Plan& plan, const std::string& path, std::string* error);

/// Writes the CSV dump of `plan` (see WritePlanCsv) to `path`.
bool WritePlanCsvFile(const Plan& plan, const Profile& profile, const std::string& path,
                      std::string* error);

}  // namespace chameleon::policy
