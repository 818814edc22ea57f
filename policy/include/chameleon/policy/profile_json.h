// JSON form of policy::Profile (docs/profile-format.md). Written by chameleon-replay
// --emit-profile and the daemon's detailed mode, read by the policy tools and tests.
// Pure string conversion (no file I/O), like the rest of policy/.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// A profile document that is not valid JSON or breaks the format. what() names the JSON
/// path of the offending field, e.g. "ops[3].reads[1]: tensor index 99 out of range (12 tensors)".
class ProfileFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Serialises `profile`. indent < 0: compact, one line; otherwise pretty-printed.
std::string ProfileToJson(const Profile& profile, int indent = -1);

/// Parses and validates a document (format_version 1): every index in range, uses ascending.
/// Throws ProfileFormatError.
Profile ProfileFromJson(std::string_view text);

/// "forward", "backward", "optimizer" or "unknown".
const char* PhaseName(Phase phase);

}  // namespace chameleon::policy
