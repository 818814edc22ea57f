// A test's inputs (a binary built in this tree, a shared trace) must exist: a missing one is a
// failure that says what is missing and where it is configured, never a skip. Header-only,
// thread-safe (no state).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

namespace chameleon::test_support {

/// Success when `path` names a regular file; otherwise a failure naming `what` and `path`, e.g.
/// ASSERT_TRUE(RequiredFile(trace, "trace (CMake cache variable CHAMELEON_TRACES_DIR)")).
inline ::testing::AssertionResult RequiredFile(const std::string& path, const std::string& what) {
  struct stat st {};
  if (!path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "missing " << what << ": '" << path << "'";
}

}  // namespace chameleon::test_support
