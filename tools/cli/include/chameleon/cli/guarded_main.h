// A tool's main body behind one catch: whatever escapes it (std::bad_alloc, a library's
// exception) ends the tool with its name, the reason and status 1, not std::terminate's abort.
#pragma once

#include <cstdio>
#include <exception>

namespace chameleon::cli {

/// Returns run()'s status, or 1 after printing "<tool>: <what>" to stderr if it threw.
template <typename Run>
int GuardedMain(const char* tool, Run&& run) noexcept {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: unknown exception\n", tool);
  }
  return 1;
}

}  // namespace chameleon::cli
