// Where chameleon-run finds libchameleon.so and chameleond: next to its own binary, in the build
// tree's layout (build/bin, build/lib) or the installed one (/usr/bin, /usr/lib/chameleon,
// /usr/sbin). Thread-safe (no state).
#pragma once

#include <string>

namespace chameleon::run {

/// The folder holding the running executable (from /proc/self/exe), or "" if unknown.
std::string ExecutableDir();

/// $CHAMELEON_LIBRARY when set; else the first existing of <exe>/../lib/libchameleon.so (build
/// tree) and <exe>/../lib/chameleon/libchameleon.so (installed). "" when none exists.
std::string FindShimLibrary(const std::string& exe_dir);

/// <exe>/chameleond (build tree), <exe>/../sbin/chameleond (installed), else "" (not found).
std::string FindDaemon(const std::string& exe_dir);

/// `existing` with `library` appended (colon-separated), unless it already names it.
std::string AppendPreload(const std::string& existing, const std::string& library);

}  // namespace chameleon::run
